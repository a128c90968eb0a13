// Pipe-SGD's codec at a ring's hops; see pipesgd_hop_codec.hpp.
#include "exec/optim/pipesgd_hop_codec.hpp"

namespace trainsim {

HopCodec pipesgd_hop_codec(GradientCompression kind) {
  return {[kind](std::span<const float> values) { return pack_compressed(compress_gradient(values, kind)); },
          [kind](std::span<const float> message, std::span<float> out) {
            decompress_gradient(unpack_compressed(message, static_cast<int64_t>(out.size()), kind), out);
          }};
}

}  // namespace trainsim
