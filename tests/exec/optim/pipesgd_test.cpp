// Pipe-SGD (seed 002 §3): the K − 1 gradient delay, 16-bit truncation and
// 8-bit quantization (exact round trips on hand values, error bounds on
// random ones, bytes on the wire), and the decompress-add-recompress sum.
#include "exec/optim/pipesgd.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "model/error.hpp"

namespace trainsim {
namespace {

// A one-layer, one-value gradient tagged with `value`.
Gradients tagged(float value) {
  ParamGrad grad;
  grad.dense = Tensor({1});
  grad.dense.data = {value};
  return {{grad}};
}

// `count` floats in [−amplitude, amplitude) from the engine's bits (not from
// std::uniform_real_distribution, so they repeat across standard libraries),
// with magnitudes spread over several octaves.
std::vector<float> random_values(uint64_t seed, size_t count, float amplitude) {
  std::mt19937_64 engine(seed);
  std::vector<float> values(count);
  for (float& value : values) {
    const uint64_t bits = engine();
    const float unit = static_cast<float>(bits >> 40) / static_cast<float>(1 << 24);  // [0, 1), 24 bits
    const float octave = std::ldexp(1.0f, -static_cast<int>((bits >> 8) & 7));        // 1 .. 2^-7
    value = (2.0f * unit - 1.0f) * amplitude * octave;
  }
  return values;
}

TEST(GradientDelay, WidthThreeAppliesEachGradientTwoIterationsLater) {
  // K = 3: the gradient of iteration t comes back at iteration t + 2.
  GradientDelay delay(3);
  EXPECT_FALSE(delay.push(tagged(0)).has_value());
  EXPECT_FALSE(delay.push(tagged(1)).has_value());
  EXPECT_EQ(delay.push(tagged(2))->at(0).at(0).dense.data[0], 0.0f);
  EXPECT_EQ(delay.push(tagged(3))->at(0).at(0).dense.data[0], 1.0f);
  EXPECT_EQ(delay.pending(), 2);
  const std::vector<Gradients> left = delay.drain();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0][0][0].dense.data[0], 2.0f);
  EXPECT_EQ(left[1][0][0].dense.data[0], 3.0f);
  EXPECT_EQ(delay.pending(), 0);
}

TEST(GradientDelay, WidthOneIsSynchronous) {
  GradientDelay delay(1);
  EXPECT_EQ(delay.push(tagged(5))->at(0).at(0).dense.data[0], 5.0f);
  EXPECT_TRUE(delay.drain().empty());
  EXPECT_THROW(GradientDelay(0), InputError);
}

TEST(Truncate16, RoundTripsValuesWithEmptyLowBitsExactly) {
  // 1.0 = 0x3F800000, −2.5 = 0xC0200000, 3.140625 = 0x40490000, 0: low 16 bits all zero.
  const std::vector<float> values = {1.0f, -2.5f, 3.140625f, 0.0f};
  const std::vector<uint16_t> halves = truncate16(values);
  EXPECT_EQ(halves, (std::vector<uint16_t>{0x3F80, 0xC020, 0x4049, 0x0000}));
  std::vector<float> back(values.size());
  expand16(halves, back);
  EXPECT_EQ(back, values);
}

TEST(Truncate16, TruncatesTowardZero) {
  // 1 + 2^-10 = 0x3F802000: the 2^-10 bit lies in the dropped half -> 1.0;
  // likewise −(1 + 2^-10) -> −1.0 (toward zero, not toward −∞).
  // 1 + 2^-7 = 0x3F810000 keeps its last stored mantissa bit.
  const std::vector<float> values = {1.0f + 0x1p-10f, -(1.0f + 0x1p-10f), 1.0f + 0x1p-7f};
  std::vector<float> back(values.size());
  expand16(truncate16(values), back);
  EXPECT_EQ(back, (std::vector<float>{1.0f, -1.0f, 1.0f + 0x1p-7f}));
}

TEST(Truncate16, RelativeErrorBelowTwoToMinusSevenOnRandomValues) {
  // 7 explicit mantissa bits are kept: the dropped part is < 1 ulp of bfloat16 = 2^-7 relative.
  const std::vector<float> values = random_values(11, 4096, 3.0f);
  std::vector<float> back(values.size());
  expand16(truncate16(values), back);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_LE(std::fabs(back[i]), std::fabs(values[i]));
    EXPECT_EQ(std::signbit(back[i]), std::signbit(values[i]));
    EXPECT_LT(std::fabs(values[i] - back[i]), 0x1p-7f * std::fabs(values[i]) + 1e-38f) << values[i];
  }
}

TEST(Truncate16, NanStaysNan) {
  // 0x7F800001 is a NaN whose payload is only in the low bits; plain truncation would give +inf.
  const std::vector<float> values = {std::bit_cast<float>(0x7F800001u)};
  std::vector<float> back(1);
  expand16(truncate16(values), back);
  EXPECT_TRUE(std::isnan(back[0]));
}

TEST(Quantize8, RoundTripsMultiplesOfTheScaleExactly) {
  // max|g| = 15.875 = 127·0.125, so scale = 0.125 and every multiple of 0.125 in range is exact.
  const std::vector<float> values = {15.875f, -0.125f, 0.0f, 1.5f, -15.875f};
  const Quantized8 quantized = quantize8(values);
  EXPECT_EQ(quantized.scale, 0.125f);
  EXPECT_EQ(quantized.values, (std::vector<int8_t>{127, -1, 0, 12, -127}));
  std::vector<float> back(values.size());
  dequantize8(quantized, back);
  EXPECT_EQ(back, values);
}

TEST(Quantize8, RoundsToNearestTiesAwayFromZero) {
  // max = 127 -> scale 1: 0.4 -> 0, 0.5 -> 1, −0.5 -> −1, 2.6 -> 3.
  const Quantized8 quantized = quantize8(std::vector<float>{127.0f, 0.4f, 0.5f, -0.5f, 2.6f});
  EXPECT_EQ(quantized.values, (std::vector<int8_t>{127, 0, 1, -1, 3}));
}

TEST(Quantize8, ErrorAtMostHalfAScaleOnRandomValues) {
  // |g − q·scale| <= scale/2 from rounding to nearest, plus float rounding of
  // g/scale (<= 127·2^-24 levels) and of q·scale (<= 2^-24·max): bounded by max·2^-22.
  const std::vector<float> values = random_values(12, 4096, 5.0f);
  const Quantized8 quantized = quantize8(values);
  float max_abs = 0;
  for (float value : values) max_abs = std::max(max_abs, std::fabs(value));
  EXPECT_EQ(quantized.scale, max_abs / 127.0f);
  std::vector<float> back(values.size());
  dequantize8(quantized, back);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_LE(std::fabs(values[i] - back[i]), 0.5f * quantized.scale + max_abs * 0x1p-22f) << values[i];
  }
}

TEST(Quantize8, ZerosStayZeroAndNonFiniteBecomesNan) {
  std::vector<float> back(2);
  dequantize8(quantize8(std::vector<float>{0.0f, 0.0f}), back);
  EXPECT_EQ(back, (std::vector<float>{0.0f, 0.0f}));
  dequantize8(quantize8(std::vector<float>{1.0f, INFINITY}), back);
  EXPECT_TRUE(std::isnan(back[0]));
  EXPECT_TRUE(std::isnan(back[1]));
}

TEST(Compression, BytesHalvedOrQuarteredPlusTheScale) {
  // 1000 floats: 4000 bytes raw, 2000 truncated, 1000 int8 + a 4-byte float scale.
  EXPECT_EQ(compressed_bytes(1000, GradientCompression::kNone), 4000);
  EXPECT_EQ(compressed_bytes(1000, GradientCompression::kTrunc16), 2000);
  EXPECT_EQ(compressed_bytes(1000, GradientCompression::kQuant8), 1004);
}

TEST(Compression, ParsesConfigNamesAndRejectsOthers) {
  EXPECT_EQ(parse_gradient_compression("trunc16", "--set compression"), GradientCompression::kTrunc16);
  EXPECT_EQ(gradient_compression_name(GradientCompression::kQuant8), "quant8");
  try {
    parse_gradient_compression("fp8", "--set compression");
    FAIL() << "no InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "--set compression");
  }
}

TEST(CompressedSum, UncompressedChainIsThePlainSumInWorkerOrder) {
  // {1,2} + {3,4} + {5,6} = {9, 12}.
  const std::vector<float> a = {1, 2}, b = {3, 4}, c = {5, 6};
  const std::vector<std::span<const float>> workers = {a, b, c};
  EXPECT_EQ(compressed_chain_sum(workers, GradientCompression::kNone), (std::vector<float>{9, 12}));
}

TEST(CompressedSum, EachHopDecompressesAddsAndRecompresses) {
  // quant8, g_0 = {127, 0.4}, g_1 = {0, 0.4}:
  //   hop 0 compresses g_0 with scale 1 -> codes {127, 0} (0.4 rounds to 0);
  //   hop 1 decompresses {127, 0}, adds g_1 -> {127, 0.4}, recompresses -> {127, 0}.
  // The result is {127, 0}, not the float sum {127, 0.8}: the loss of each hop stays.
  const std::vector<float> g0 = {127.0f, 0.4f}, g1 = {0.0f, 0.4f};
  const std::vector<std::span<const float>> workers = {g0, g1};
  EXPECT_EQ(compressed_chain_sum(workers, GradientCompression::kQuant8), (std::vector<float>{127.0f, 0.0f}));
  // trunc16: 1 + 2^-10 truncates back to 1 at the second hop.
  const std::vector<float> t0 = {1.0f}, t1 = {0x1p-10f};
  const std::vector<std::span<const float>> truncated = {t0, t1};
  EXPECT_EQ(compressed_chain_sum(truncated, GradientCompression::kTrunc16), (std::vector<float>{1.0f}));
}

}  // namespace
}  // namespace trainsim
