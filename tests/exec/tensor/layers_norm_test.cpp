// Batch norm, layer norm, GELU and global average pooling: hand-computed
// cases, shapes and finite-difference gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::tensor_of;
using testing_fixtures::expect_values_near;
using testing_fixtures::expect_layer_gradients;
using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

TEST(BatchNorm, HasScaleAndShiftInitialisedToOneAndZero) {
  const auto bn = make_batchnorm({3, 4, 4});
  EXPECT_EQ(bn->param_shapes(), (std::vector<std::vector<int64_t>>{{3}, {3}}));
  std::mt19937_64 rng(1);
  LayerParams params;
  bn->init_params(params, rng);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].data, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(params[1].data, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(make_batchnorm({5})->param_shapes(), (std::vector<std::vector<int64_t>>{{5}, {5}}));
}

TEST(BatchNorm, NormalizesABatchOfTwoFeatures) {
  // One channel, batch {1, 3}: mean 2, biased variance 1, x̂ = ±1/sqrt(1 + 1e-5) ≈ ±0.999995;
  // scale 2, shift 0.5: y = {-2 + 0.5, 2 + 0.5} = {-1.5, 2.5}.
  const auto bn = make_batchnorm({1});
  const LayerParams params{tensor_of({1}, {2}), tensor_of({1}, {0.5f})};
  LayerCache cache;
  const Tensor y = bn->forward(params, tensor_of({2, 1}, {1, 3}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 1}));
  expect_values_near(y, {-1.5f, 2.5f}, 1e-4);
}

TEST(BatchNorm, NormalizesEachChannelOverTheBatchAndPositions) {
  // x {B=2, C=2, H=1, W=2}. Channel 0 holds {1, 3} in both samples: mean 2,
  // variance 1, x̂ = {-1, 1, -1, 1}. Channel 1 holds {0, 4} then {4, 0}: mean 2,
  // variance 4, x̂ = (x - 2)/2 = {-1, 1, 1, -1} (eps moves these by < 1e-5).
  // scale {2, 1}, shift {0, -1}: channel 0 -> {-2, 2}, channel 1 -> {-2, 0} then {0, -2}.
  const auto bn = make_batchnorm({2, 1, 2});
  const LayerParams params{tensor_of({2}, {2, 1}), tensor_of({2}, {0, -1})};
  LayerCache cache;
  const Tensor y = bn->forward(params, tensor_of({2, 2, 1, 2}, {1, 3, 0, 4, 1, 3, 4, 0}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2, 1, 2}));
  expect_values_near(y, {-2, 2, -2, 0, -2, 2, 0, -2}, 1e-4);
}

TEST(BatchNorm, RunningStatisticsFollowPyTorchsMomentumAndUnbiasedVariance) {
  // Starting at mean 0, variance 1. The channel of NormalizesEachChannelOverTheBatchAndPositions'
  // channel 1 holds {0, 4, 4, 0}: mean 2, biased variance 4, unbiased 4·4/3 = 16/3.
  // After one batch: mean 0.9·0 + 0.1·2 = 0.2, variance 0.9·1 + 0.1·16/3 = 1.4333...;
  // after the same batch again: 0.9·0.2 + 0.2 = 0.38, 0.9·1.4333 + 0.5333 = 1.8233...
  const auto bn = make_batchnorm({1, 1, 2});
  LayerParams statistics = bn->init_statistics();
  ASSERT_EQ(statistics.size(), 2u);
  expect_values_near(statistics[0], {0}, 0);
  expect_values_near(statistics[1], {1}, 0);
  const LayerParams params{tensor_of({1}, {1}), tensor_of({1}, {0})};
  LayerCache cache;
  (void)bn->forward(params, tensor_of({2, 1, 1, 2}, {0, 4, 4, 0}), cache);
  bn->update_statistics(statistics, cache);
  expect_values_near(statistics[0], {0.2f}, 1e-6);
  expect_values_near(statistics[1], {0.9f + 0.1f * 16 / 3}, 1e-6);
  bn->update_statistics(statistics, cache);
  expect_values_near(statistics[0], {0.38f}, 1e-6);
  expect_values_near(statistics[1], {0.9f * (0.9f + 0.1f * 16 / 3) + 0.1f * 16 / 3}, 1e-5);
}

TEST(BatchNorm, EvaluationUsesTheRunningStatisticsSampleBySample) {
  // Two channels with running mean {2, -1}, variance {4, 0.25}, scale {2, 1},
  // shift {0, 1}: channel 0 maps x to 2·(x - 2)/2 = x - 2, channel 1 to
  // (x + 1)/0.5 + 1 = 2x + 3 (eps moves these by under 1e-3). A sample's output
  // is the same alone as in a batch.
  const auto bn = make_batchnorm({2, 1, 2});
  const LayerParams params{tensor_of({2}, {2, 1}), tensor_of({2}, {0, 1})};
  const LayerParams statistics{tensor_of({2}, {2, -1}), tensor_of({2}, {4, 0.25f})};
  const Tensor batch = tensor_of({2, 2, 1, 2}, {1, 3, 0, 4, 5, 6, -1, 2});
  const Tensor* xs[] = {&batch};
  const Tensor y = bn->forward_eval(params, statistics, xs);
  expect_values_near(y, {-1, 1, 3, 11, 3, 4, 1, 7}, 1e-3);
  const Tensor second = tensor_of({1, 2, 1, 2}, {5, 6, -1, 2});
  const Tensor* alone[] = {&second};
  expect_values_near(bn->forward_eval(params, statistics, alone), {3, 4, 1, 7}, 1e-3);
}

TEST(LayerNorm, HasNoStatisticsAndEvaluatesAsItTrains) {
  const auto ln = make_layernorm(3);
  EXPECT_TRUE(ln->init_statistics().empty());
  const LayerParams params{tensor_of({3}, {1, 2, 3}), tensor_of({3}, {0, 1, 0})};
  const Tensor x = tensor_of({2, 3}, {1, 2, 4, -1, 0, 5});
  LayerCache cache;
  const Tensor trained = ln->forward(params, x, cache);
  const Tensor* xs[] = {&x};
  EXPECT_EQ(ln->forward_eval(params, {}, xs).data, trained.data);
}

TEST(BatchNorm, BackwardOfAConstantGradientAddsCountsToShiftOnly) {
  // Σ y = N·shift + scale·Σ x̂ with Σ x̂ = 0 whatever x: dy = 1 gives dx = 0,
  // dshift = N = 2·1·2 = 4 per channel, dscale = Σ x̂ = 0. A second backward adds.
  const auto bn = make_batchnorm({2, 1, 2});
  const LayerParams params{tensor_of({2}, {2, 1}), tensor_of({2}, {0, -1})};
  LayerCache cache;
  const Tensor x = tensor_of({2, 2, 1, 2}, {1, 3, 0, 4, 1, 3, 4, 0});
  bn->forward(params, x, cache);
  LayerGrads grads = zero_layer_grads(*bn, params);
  const Tensor dy(x.shape, 1.0f);
  Tensor dx = bn->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.shape, x.shape);
  expect_values_near(dx, std::vector<float>(8, 0.0f), 1e-5);
  expect_values_near(grads[0].dense, {0, 0}, 1e-5);
  expect_values_near(grads[1].dense, {4, 4}, 0);
  dx = bn->backward(params, dy, cache, grads);
  expect_values_near(grads[1].dense, {8, 8}, 0);
}

TEST(BatchNorm, OutputHasZeroMeanAndUnitVariancePerChannel) {
  std::mt19937_64 rng(3);
  const auto bn = make_batchnorm({3, 4, 5});
  LayerParams params;
  bn->init_params(params, rng);
  LayerCache cache;
  const Tensor y = bn->forward(params, random_tensor({6, 3, 4, 5}, rng, 2.0f, 9.0f), cache);
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0.0, squares = 0.0;
    const int64_t count = 6 * 20;
    for (int64_t b = 0; b < 6; ++b) {
      for (int64_t p = 0; p < 20; ++p) sum += y.data[(b * 3 + c) * 20 + p];
    }
    for (int64_t b = 0; b < 6; ++b) {
      for (int64_t p = 0; p < 20; ++p) squares += std::pow(y.data[(b * 3 + c) * 20 + p] - sum / count, 2);
    }
    EXPECT_NEAR(sum / count, 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(squares / count, 1.0, 1e-3) << "channel " << c;
  }
}

TEST(BatchNorm, RejectsBadShapes) {
  EXPECT_THROW(make_batchnorm({2, 3}), InternalError);
  EXPECT_THROW(make_batchnorm({0}), InternalError);
  const auto bn = make_batchnorm({2, 2, 2});
  LayerParams params{Tensor({2}, 1.0f), Tensor({2})};
  LayerCache cache;
  EXPECT_THROW(bn->forward(params, Tensor({3, 2, 2, 3}), cache), InternalError);
  params.pop_back();
  EXPECT_THROW(bn->forward(params, Tensor({3, 2, 2, 2}), cache), InternalError);
}

TEST(BatchNorm, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(5);
  const auto bn = make_batchnorm({3, 2, 3});
  const LayerParams params{random_tensor({3}, rng, 0.5f, 1.5f), random_tensor({3}, rng)};
  expect_layer_gradients(*bn, params, random_tensor({4, 3, 2, 3}, rng, -2.0f, 2.0f), 6);
}

TEST(BatchNorm, GradientsMatchFiniteDifferencesOnFeatures) {
  std::mt19937_64 rng(7);
  const auto bn = make_batchnorm({4});
  const LayerParams params{random_tensor({4}, rng, 0.5f, 1.5f), random_tensor({4}, rng)};
  expect_layer_gradients(*bn, params, random_tensor({5, 4}, rng, -2.0f, 2.0f), 8);
}

TEST(LayerNorm, NormalizesEachRowOfTheLastDimension) {
  // Row [0, 0, 2, 2]: mean 1, variance 1, x̂ = [-1, -1, 1, 1].
  // Row [5, 1, 5, 1]: mean 3, variance 4, x̂ = [1, -1, 1, -1].
  // scale [1, 2, 0.5, 1], shift [0, 1, 0, -1]:
  // y = [-1, -1, 0.5, 0] and [1, -1, 0.5, -2] (eps moves these by < 1e-5).
  const auto ln = make_layernorm(4);
  EXPECT_EQ(ln->param_shapes(), (std::vector<std::vector<int64_t>>{{4}, {4}}));
  const LayerParams params{tensor_of({4}, {1, 2, 0.5f, 1}), tensor_of({4}, {0, 1, 0, -1})};
  LayerCache cache;
  const Tensor y = ln->forward(params, tensor_of({2, 4}, {0, 0, 2, 2, 5, 1, 5, 1}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 4}));
  expect_values_near(y, {-1, -1, 0.5f, 0, 1, -1, 0.5f, -2}, 1e-4);
}

TEST(LayerNorm, InitialisesScaleToOneAndShiftToZero) {
  std::mt19937_64 rng(9);
  LayerParams params;
  make_layernorm(3)->init_params(params, rng);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].data, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(params[1].data, (std::vector<float>{0, 0, 0}));
}

TEST(LayerNorm, KeepsSequenceShapesAndRejectsOtherWidths) {
  std::mt19937_64 rng(10);
  const auto ln = make_layernorm(4);
  LayerParams params;
  ln->init_params(params, rng);
  LayerCache cache;
  EXPECT_EQ(ln->forward(params, random_tensor({2, 3, 4}, rng), cache).shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_THROW(ln->forward(params, random_tensor({2, 3, 5}, rng), cache), InternalError);
  EXPECT_THROW(make_layernorm(0), InternalError);
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(11);
  const auto ln = make_layernorm(6);
  const LayerParams params{random_tensor({6}, rng, 0.5f, 1.5f), random_tensor({6}, rng)};
  expect_layer_gradients(*ln, params, random_tensor({2, 3, 6}, rng, -2.0f, 2.0f), 12);
}

TEST(Gelu, MatchesXTimesTheNormalCdf) {
  // Φ(1) = 0.8413447, Φ(-1) = 0.1586553, Φ(2) = 0.9772499:
  // y = [0, 0.8413447, -0.1586553, 1.9544997].
  // φ(1) = φ(-1) = 0.2419707, so dy = 1 gives dx = Φ(x) + x·φ(x) =
  // [0.5, 1.0833154, 0.1586553 - 0.2419707 = -0.0833154, 0.9772499 + 2·0.0539910 = 1.0852319].
  const auto gelu = make_gelu();
  EXPECT_TRUE(gelu->param_shapes().empty());
  LayerCache cache;
  const Tensor y = gelu->forward({}, tensor_of({1, 4}, {0, 1, -1, 2}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 4}));
  expect_values_near(y, {0, 0.8413447f, -0.1586553f, 1.9544997f}, 1e-6);
  LayerGrads none;
  const Tensor dx = gelu->backward({}, Tensor({1, 4}, 1.0f), cache, none);
  expect_values_near(dx, {0.5f, 1.0833154f, -0.0833154f, 1.0852319f}, 1e-6);
}

TEST(Gelu, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(13);
  expect_layer_gradients(*make_gelu(), {}, random_tensor({3, 2, 10}, rng, -3.0f, 3.0f), 14);
}

TEST(GlobalAvgPool, AveragesEachChannelPlane) {
  // Channel 0 [1, 2, 3, 4] -> 2.5, channel 1 [0, 0, 0, 8] -> 2.
  // Backward of dy [4, 8] spreads dy / 4: channel 0 all 1, channel 1 all 2.
  const auto pool = make_global_avgpool({2, 2, 2});
  EXPECT_TRUE(pool->param_shapes().empty());
  LayerCache cache;
  const Tensor y = pool->forward({}, tensor_of({1, 2, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 8}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{2.5f, 2}));
  LayerGrads none;
  const Tensor dx = pool->backward({}, tensor_of({1, 2}, {4, 8}), cache, none);
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(dx.data, (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(GlobalAvgPool, RejectsBadShapes) {
  EXPECT_THROW(make_global_avgpool({4}), InternalError);
  const auto pool = make_global_avgpool({2, 2, 2});
  LayerCache cache;
  EXPECT_THROW(pool->forward({}, Tensor({1, 2, 2, 3}), cache), InternalError);
  LayerGrads none;
  EXPECT_THROW(pool->backward({}, Tensor({1, 3}), cache, none), InternalError);
}

TEST(GlobalAvgPool, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(15);
  expect_layer_gradients(*make_global_avgpool({3, 4, 5}), {}, random_tensor({3, 3, 4, 5}, rng), 16);
}

}  // namespace
}  // namespace trainsim
