// Pipe-SGD (seed 002 §3; docs/equations.md §1): the gradient of iteration t is
// applied at iteration t + K − 1 (a delay queue, K the pipeline width), and
// the communicated gradients may be compressed by 16-bit truncation or 8-bit
// scalar quantization (seed 002 §3.2), light enough to run inside AllReduce.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/tensor/tensor.hpp"

namespace trainsim {

// Pipe-SGD's delay: push the gradient computed in iteration t, get back the
// one computed in iteration t − (K − 1) to apply now. K = 1 is synchronous SGD
// (the pushed gradient comes straight back); K = 2 is the paper's optimum
// (staleness 1).
class GradientDelay {
 public:
  // InputError naming "--set width" unless width >= 1.
  explicit GradientDelay(int64_t width);

  // nullopt during the first K − 1 iterations (nothing old enough yet).
  std::optional<Gradients> push(Gradients grads);
  // At the end of training: the K − 1 (or fewer) gradients still queued, oldest first.
  std::vector<Gradients> drain();

  int64_t width() const { return width_; }
  int64_t pending() const { return static_cast<int64_t>(queue_.size()); }

 private:
  int64_t width_;
  std::deque<Gradients> queue_;
};

enum class GradientCompression { kNone, kTrunc16, kQuant8 };

// Config names "none", "trunc16", "quant8"; InputError naming `where` otherwise.
GradientCompression parse_gradient_compression(const std::string& name, const std::string& where);
std::string gradient_compression_name(GradientCompression compression);

// 16-bit truncation: keeps the upper 16 bits of each float32 (sign, exponent,
// 7 mantissa bits: bfloat16 rounded toward zero), so |t| <= |g| and
// |g − t| < 2^-7·|g| for normal g. NaN stays NaN (a quiet NaN).
std::vector<uint16_t> truncate16(std::span<const float> values);
void expand16(std::span<const uint16_t> halves, std::span<float> out);

// 8-bit quantization with one scale per compressed buffer (per tensor or per
// chunk, whatever the caller passes; seed 002: "a quantization range
// determined by the maximal element of a gradient vector"):
// scale = max|g| / 127, q = round(g / scale) to nearest, ties away from zero,
// in [−127, 127]; decompressed g' = q·scale, so |g − g'| <= scale / 2.
// All zeros give scale 0. A NaN or infinite value makes the scale NaN, so
// every decompressed value is NaN: divergence stays visible.
struct Quantized8 {
  float scale = 0;
  std::vector<int8_t> values;
};
Quantized8 quantize8(std::span<const float> values);
void dequantize8(const Quantized8& quantized, std::span<float> out);

// One communicated gradient buffer in the chosen form.
struct CompressedGradient {
  GradientCompression compression = GradientCompression::kNone;
  std::vector<float> raw;        // kNone
  std::vector<uint16_t> halves;  // kTrunc16
  Quantized8 quantized;          // kQuant8
};

CompressedGradient compress_gradient(std::span<const float> values, GradientCompression compression);
// out = the decompressed values (out.size() = the compressed count).
void decompress_gradient(const CompressedGradient& message, std::span<float> out);
int64_t compressed_count(const CompressedGradient& message);

// Bytes on the wire for `count` floats: 4·count (none), 2·count (trunc16),
// count + 4 (quant8: one int8 per value plus the float scale).
int64_t compressed_bytes(int64_t count, GradientCompression compression);

// A message as float32 words for a transport that carries floats, its bytes
// those of compressed_bytes rounded up to whole words: kNone the values,
// kTrunc16 two halves per word, kQuant8 the scale then four int8 per word.
std::vector<float> pack_compressed(const CompressedGradient& message);
// And back, for a message of `count` values compressed with `compression`.
CompressedGradient unpack_compressed(std::span<const float> words, int64_t count, GradientCompression compression);

// How the workers' sum is formed (seed 002 §3.2, Fig. 3b): compressed codes
// cannot be added (two quant8 buffers have different scales), so every
// "transmit-and-reduce" step of the AllReduce decompresses the partial sum it
// received, adds its own float32 gradient, and compresses the new partial sum
// for the next hop. This is that step.
CompressedGradient reduce_step(const CompressedGradient& received, std::span<const float> local);

// The sum the ring forms for one chunk, worker 0's gradient first: compress
// g_0, then one reduce_step per further worker; every worker decompresses the
// same final message (the all-gather forwards it unchanged). With kNone this
// is the plain float sum in worker order.
std::vector<float> compressed_chain_sum(std::span<const std::span<const float>> worker_values,
                                        GradientCompression compression);

}  // namespace trainsim
