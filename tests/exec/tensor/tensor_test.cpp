// Tensor storage, its matrix view, the seeded uniform draw and the default
// Kaiming-uniform initialisation.
#include "exec/tensor/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "exec/tensor/kernels_impl.hpp"

namespace trainsim {
namespace {

TEST(Tensor, HoldsOneValuePerElementOfItsShape) {
  const Tensor t({2, 3, 4}, 1.5f);
  EXPECT_EQ(t.size(), 24);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.row_size(), 12);
  for (float v : t.data) EXPECT_EQ(v, 1.5f);
}

TEST(Tensor, MatrixViewIsRowMajorOverTheBatch) {
  Tensor t({2, 1, 3});
  for (int i = 0; i < 6; ++i) t.data[i] = static_cast<float>(i);
  const auto m = t.matrix();
  ASSERT_EQ(m.rows(), 2);
  ASSERT_EQ(m.cols(), 3);
  EXPECT_EQ(m(1, 0), 3.0f);  // row 1 starts at element 1·3
  t.matrix()(0, 2) = 9.0f;   // writes through to the buffer
  EXPECT_EQ(t.data[2], 9.0f);
}

TEST(Tensor, EmptyBatchHasNoRowsAndNoRowSize) {
  const Tensor t({0, 5});
  EXPECT_EQ(t.rows(), 0);
  EXPECT_EQ(t.row_size(), 0);
}

TEST(UniformFromBits, RepeatsForTheSameSeedAndStaysInBounds) {
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 1000; ++i) {
    const float va = uniform_from_bits(a, 0.5f);
    EXPECT_EQ(va, uniform_from_bits(b, 0.5f));
    EXPECT_GE(va, -0.5f);
    EXPECT_LT(va, 0.5f);
  }
}

TEST(UniformFromBits, MapsTheTop24BitsOntoTheInterval) {
  // A draw with top 24 bits k maps to (2·k/2^24 - 1)·bound: k = 2^23 is the
  // centre 0, k = 0 the lower edge. Checked on the first draw of a twin engine.
  std::mt19937_64 rng;
  const uint64_t first = std::mt19937_64()();
  const double k = static_cast<double>(first >> 40);
  EXPECT_FLOAT_EQ(uniform_from_bits(rng, 2.0f), static_cast<float>((2.0 * k / 16777216.0 - 1.0) * 2.0));
}

TEST(InitParams, DrawsWeightAndBiasWithinOneOverSqrtFanIn) {
  // Linear 400 -> 50: fan_in = 400, bound = 1/sqrt(400) = 0.05 for both tensors.
  const auto linear = make_linear(400, 50, true);
  LayerParams params;
  std::mt19937_64 rng(3);
  linear->init_params(params, rng);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{50, 400}));
  EXPECT_EQ(params[1].shape, (std::vector<int64_t>{50}));
  float max_weight = 0.0f, max_bias = 0.0f;
  for (float v : params[0].data) max_weight = std::max(max_weight, std::abs(v));
  for (float v : params[1].data) max_bias = std::max(max_bias, std::abs(v));
  EXPECT_LE(max_weight, 0.05f);
  EXPECT_GT(max_weight, 0.049f);  // 20,000 uniform draws reach the edge
  EXPECT_LE(max_bias, 0.05f);
  EXPECT_GT(max_bias, 0.0f);
}

TEST(InitParams, ConvFanInIsChannelsPerGroupTimesKernel) {
  // conv 8 -> 4 channels, 3x3, 2 groups: fan_in = 8/2·3·3 = 36, bound 1/6.
  WindowSpec window{3, 3, 1, 1, 1, 1, 2, false};
  const auto conv = make_conv2d({8, 5, 5}, 4, window, true);
  LayerParams params;
  std::mt19937_64 rng(11);
  conv->init_params(params, rng);
  ASSERT_EQ(params[0].shape, (std::vector<int64_t>{4, 4, 3, 3}));
  float max_weight = 0.0f;
  for (float v : params[0].data) max_weight = std::max(max_weight, std::abs(v));
  EXPECT_LE(max_weight, 1.0f / 6.0f);
  EXPECT_GT(max_weight, 0.9f / 6.0f);  // 144 draws: the largest is this close with probability 1 - 0.9^144
}

}  // namespace
}  // namespace trainsim
