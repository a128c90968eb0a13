// Pipe-SGD's gradient delay and its two light compressions (seed 002 §3.2):
// truncation to the upper 16 bits, and 8-bit scalar quantization.
#include "exec/optim/pipesgd.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "model/error.hpp"

namespace trainsim {

GradientDelay::GradientDelay(int64_t width) : width_(width) {
  if (width < 1) throw InputError("--set width", "is " + std::to_string(width), "a pipeline width K >= 1");
}

std::optional<Gradients> GradientDelay::push(Gradients grads) {
  queue_.push_back(std::move(grads));
  if (static_cast<int64_t>(queue_.size()) < width_) return std::nullopt;
  Gradients oldest = std::move(queue_.front());
  queue_.pop_front();
  return oldest;
}

std::vector<Gradients> GradientDelay::drain() {
  std::vector<Gradients> left(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  return left;
}

GradientCompression parse_gradient_compression(const std::string& name, const std::string& where) {
  if (name == "none") return GradientCompression::kNone;
  if (name == "trunc16") return GradientCompression::kTrunc16;
  if (name == "quant8") return GradientCompression::kQuant8;
  throw InputError(where, "is '" + name + "'", "none, trunc16 or quant8");
}

std::string gradient_compression_name(GradientCompression compression) {
  switch (compression) {
    case GradientCompression::kNone: return "none";
    case GradientCompression::kTrunc16: return "trunc16";
    case GradientCompression::kQuant8: return "quant8";
  }
  throw std::logic_error("unknown gradient compression");
}

std::vector<uint16_t> truncate16(std::span<const float> values) {
  // A NaN whose payload sits in the low 16 bits would truncate to infinity.
  constexpr uint16_t kQuietNan = 0x7FC0;
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    halves[i] = std::isnan(values[i]) ? kQuietNan : static_cast<uint16_t>(std::bit_cast<uint32_t>(values[i]) >> 16);
  }
  return halves;
}

void expand16(std::span<const uint16_t> halves, std::span<float> out) {
  TRAINSIM_CHECK(out.size() == halves.size(), "expand16 output size");
  for (size_t i = 0; i < halves.size(); ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(halves[i]) << 16);
}

Quantized8 quantize8(std::span<const float> values) {
  constexpr float kLevels = 127.0f;
  Quantized8 quantized;
  quantized.values.assign(values.size(), 0);
  float max_abs = 0.0f;
  bool finite = true;
  for (float value : values) {
    finite = finite && std::isfinite(value);
    max_abs = std::max(max_abs, std::fabs(value));
  }
  if (!finite) {
    quantized.scale = std::numeric_limits<float>::quiet_NaN();
    return quantized;
  }
  quantized.scale = max_abs / kLevels;
  if (max_abs == 0.0f) return quantized;
  for (size_t i = 0; i < values.size(); ++i) {
    const long level = std::lround(values[i] / quantized.scale);
    quantized.values[i] = static_cast<int8_t>(std::clamp(level, -127L, 127L));
  }
  return quantized;
}

void dequantize8(const Quantized8& quantized, std::span<float> out) {
  TRAINSIM_CHECK(out.size() == quantized.values.size(), "dequantize8 output size");
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(quantized.values[i]) * quantized.scale;
}

CompressedGradient compress_gradient(std::span<const float> values, GradientCompression compression) {
  CompressedGradient message;
  message.compression = compression;
  switch (compression) {
    case GradientCompression::kNone: message.raw.assign(values.begin(), values.end()); break;
    case GradientCompression::kTrunc16: message.halves = truncate16(values); break;
    case GradientCompression::kQuant8: message.quantized = quantize8(values); break;
  }
  return message;
}

int64_t compressed_count(const CompressedGradient& message) {
  switch (message.compression) {
    case GradientCompression::kNone: return static_cast<int64_t>(message.raw.size());
    case GradientCompression::kTrunc16: return static_cast<int64_t>(message.halves.size());
    case GradientCompression::kQuant8: return static_cast<int64_t>(message.quantized.values.size());
  }
  throw std::logic_error("unknown gradient compression");
}

void decompress_gradient(const CompressedGradient& message, std::span<float> out) {
  switch (message.compression) {
    case GradientCompression::kNone:
      TRAINSIM_CHECK(out.size() == message.raw.size(), "decompress output size");
      std::copy(message.raw.begin(), message.raw.end(), out.begin());
      break;
    case GradientCompression::kTrunc16: expand16(message.halves, out); break;
    case GradientCompression::kQuant8: dequantize8(message.quantized, out); break;
  }
}

int64_t compressed_bytes(int64_t count, GradientCompression compression) {
  switch (compression) {
    case GradientCompression::kNone: return 4 * count;
    case GradientCompression::kTrunc16: return 2 * count;
    case GradientCompression::kQuant8: return count + static_cast<int64_t>(sizeof(float));
  }
  throw std::logic_error("unknown gradient compression");
}

std::vector<float> pack_compressed(const CompressedGradient& message) {
  const int64_t count = compressed_count(message);
  switch (message.compression) {
    case GradientCompression::kNone: return message.raw;
    case GradientCompression::kTrunc16: {
      std::vector<float> words(static_cast<size_t>((count + 1) / 2), 0.0f);
      if (count > 0) std::memcpy(words.data(), message.halves.data(), message.halves.size() * sizeof(uint16_t));
      return words;
    }
    case GradientCompression::kQuant8: {
      std::vector<float> words(static_cast<size_t>(1 + (count + 3) / 4), 0.0f);
      words[0] = message.quantized.scale;
      if (count > 0) std::memcpy(words.data() + 1, message.quantized.values.data(), message.quantized.values.size());
      return words;
    }
  }
  throw std::logic_error("unknown gradient compression");
}

CompressedGradient unpack_compressed(std::span<const float> words, int64_t count, GradientCompression compression) {
  CompressedGradient message;
  message.compression = compression;
  const auto n = static_cast<size_t>(count);
  switch (compression) {
    case GradientCompression::kNone:
      TRAINSIM_CHECK(words.size() == n, "unpack_compressed: raw message size");
      message.raw.assign(words.begin(), words.end());
      break;
    case GradientCompression::kTrunc16:
      TRAINSIM_CHECK(words.size() == (n + 1) / 2, "unpack_compressed: trunc16 message size");
      message.halves.resize(n);
      if (n > 0) std::memcpy(message.halves.data(), words.data(), n * sizeof(uint16_t));
      break;
    case GradientCompression::kQuant8:
      TRAINSIM_CHECK(words.size() == 1 + (n + 3) / 4, "unpack_compressed: quant8 message size");
      message.quantized.scale = words[0];
      message.quantized.values.resize(n);
      if (n > 0) std::memcpy(message.quantized.values.data(), words.data() + 1, n);
      break;
  }
  return message;
}

CompressedGradient reduce_step(const CompressedGradient& received, std::span<const float> local) {
  std::vector<float> partial(local.size());
  TRAINSIM_CHECK(compressed_count(received) == static_cast<int64_t>(local.size()), "reduce_step sizes differ");
  decompress_gradient(received, partial);
  for (size_t i = 0; i < partial.size(); ++i) partial[i] += local[i];
  return compress_gradient(partial, received.compression);
}

std::vector<float> compressed_chain_sum(std::span<const std::span<const float>> worker_values,
                                        GradientCompression compression) {
  TRAINSIM_CHECK(!worker_values.empty(), "a sum over no workers");
  CompressedGradient message = compress_gradient(worker_values[0], compression);
  for (size_t worker = 1; worker < worker_values.size(); ++worker) {
    message = reduce_step(message, worker_values[worker]);
  }
  std::vector<float> sum(worker_values[0].size());
  decompress_gradient(message, sum);
  return sum;
}

}  // namespace trainsim
