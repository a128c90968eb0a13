// The codec's rates; see codec_probe.hpp.
#include "profiles/profiler/codec_probe.hpp"

#include <algorithm>
#include <vector>

#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {

CodecRates measure_codec_rates(GradientCompression compression, int64_t workers, int64_t bytes,
                               const ClusterProbeOptions& options) {
  TRAINSIM_CHECK(compression != GradientCompression::kNone && workers >= 1, "a codec and a worker to time");
  const auto floats = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
  // Values of a gradient's spread, so quant8's scale and rounding do their usual work.
  std::vector<std::vector<float>> values(static_cast<size_t>(workers), std::vector<float>(floats));
  for (auto& v : values) {
    for (size_t i = 0; i < floats; ++i) v[i] = 1e-3f * static_cast<float>(static_cast<int64_t>(i % 2001) - 1000);
  }
  std::vector<std::vector<float>> messages(values.size()), decoded(values.size(), std::vector<float>(floats));
  const auto encode = [&](int64_t t) {
    const auto i = static_cast<size_t>(t);
    messages[i] = pack_compressed(compress_gradient(values[i], compression));
  };
  const auto decode = [&](int64_t t) {
    const auto i = static_cast<size_t>(t);
    decompress_gradient(unpack_compressed(messages[i], static_cast<int64_t>(floats), compression), decoded[i]);
  };
  const double encode_s = concurrent_median_s(workers, options.warmups, options.pack_repeats, encode);
  const double decode_s = concurrent_median_s(workers, options.warmups, options.pack_repeats, decode);
  const double fp32_bytes = static_cast<double>(floats) * 4.0;
  return {fp32_bytes / encode_s, fp32_bytes / decode_s};
}

}  // namespace trainsim
