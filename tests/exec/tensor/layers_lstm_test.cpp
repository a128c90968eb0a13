// The LSTM kernel: a hand-computed recurrence, parameter shapes and init,
// causality, errors and finite-difference gradients through time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::tensor_of;
using testing_fixtures::expect_layer_gradients;
using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

LayerParams random_params(const ExecLayer& layer, std::mt19937_64& rng) {
  LayerParams params;
  for (const auto& shape : layer.param_shapes()) params.push_back(random_tensor(shape, rng));
  return params;
}

TEST(Lstm, OneUnitByHand) {
  // in = 1, hidden = 1, T = 2; W rows i, f, g, o over [x, h]: [0.5, -1], [1, 0.5],
  // [2, 1], [-1, 2]; b = [0, 1, 0, 0.5]; x = [1, 0.5].
  // t = 1, z = [1, 0]: i = σ(0.5) = 0.6224593, f = σ(2) = 0.8807971, g = tanh(2) = 0.9640276,
  //   o = σ(-0.5) = 0.3775407; c_1 = i·g = 0.6000680, h_1 = o·tanh(0.6000680) = 0.3775407·0.5370979
  //   = 0.2027763.
  // t = 2, z = [0.5, 0.2027763]: i = σ(0.0472237) = 0.5118037, f = σ(1.6013882) = 0.8322123,
  //   g = tanh(1.2027763) = 0.8344995, o = σ(0.4055526) = 0.6000210;
  //   c_2 = f·c_1 + i·g = 0.4993864 + 0.4270975 = 0.9264839,
  //   h_2 = o·tanh(0.9264839) = 0.6000210·0.7289504 = 0.4373855.
  const auto lstm = make_lstm(2, 1, 1);
  const LayerParams params{tensor_of({4, 2}, {0.5f, -1, 1, 0.5f, 2, 1, -1, 2}), tensor_of({4}, {0, 1, 0, 0.5f})};
  LayerCache cache;
  const Tensor y = lstm->forward(params, tensor_of({1, 2, 1}, {1, 0.5f}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_NEAR(y.data[0], 0.2027763f, 1e-6);
  EXPECT_NEAR(y.data[1], 0.4373855f, 1e-6);
  // A second sample in the batch runs its own recurrence: the same sequence gives the same outputs.
  const Tensor pair = lstm->forward(params, tensor_of({2, 2, 1}, {0, 0, 1, 0.5f}), cache);
  EXPECT_NEAR(pair.data[2], 0.2027763f, 1e-6);
  EXPECT_NEAR(pair.data[3], 0.4373855f, 1e-6);
}

TEST(Lstm, ParamShapesAndInitBounds) {
  const auto lstm = make_lstm(5, 3, 4);
  EXPECT_EQ(lstm->param_shapes(), (std::vector<std::vector<int64_t>>{{16, 7}, {16}}));
  std::mt19937_64 rng(41), again(41), draws(41);
  LayerParams params, same;
  lstm->init_params(params, rng);
  lstm->init_params(same, again);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{16, 7}));
  EXPECT_EQ(params[1].shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(params[0].data, same[0].data);
  EXPECT_EQ(params[1].data, same[1].data);
  // W then b, each value one draw of uniform_from_bits with bound 1/sqrt(hidden) = 0.5
  // (not 1/sqrt(in + hidden), the default fan-in rule).
  const float bound = 0.5f;
  float largest = 0.0f;
  for (const Tensor& t : params) {
    for (float v : t.data) {
      EXPECT_EQ(v, uniform_from_bits(draws, bound));
      EXPECT_LE(std::abs(v), bound);
      largest = std::max(largest, std::abs(v));
    }
  }
  EXPECT_GT(largest, 1.0f / std::sqrt(7.0f));
}

TEST(Lstm, OutputAtStepDoesNotDependOnLaterInputs) {
  std::mt19937_64 rng(42);
  const auto lstm = make_lstm(4, 3, 5);
  const LayerParams params = random_params(*lstm, rng);
  Tensor x = random_tensor({2, 4, 3}, rng);
  LayerCache cache;
  const Tensor before = lstm->forward(params, x, cache);
  for (int64_t j = 0; j < 3; ++j) x.data[2 * 3 + j] += 0.5f;  // sample 0, step 2
  const Tensor after = lstm->forward(params, x, cache);
  const auto change = [&](int64_t b, int64_t t) {
    double sum = 0.0;
    for (int64_t j = 0; j < 5; ++j) sum += std::abs(after.data[(b * 4 + t) * 5 + j] - before.data[(b * 4 + t) * 5 + j]);
    return sum;
  };
  EXPECT_EQ(change(0, 0), 0.0);
  EXPECT_EQ(change(0, 1), 0.0);
  EXPECT_GT(change(0, 2), 1e-3);
  EXPECT_GT(change(0, 3), 1e-3);
  for (int64_t t = 0; t < 4; ++t) EXPECT_EQ(change(1, t), 0.0) << "other sample, step " << t;
}

TEST(Lstm, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(43);
  const auto lstm = make_lstm(4, 5, 6);
  LayerParams params;
  lstm->init_params(params, rng);
  expect_layer_gradients(*lstm, params, random_tensor({3, 4, 5}, rng), 44);
  // Weights in ±1 drive the gates into their curved ranges.
  expect_layer_gradients(*lstm, random_params(*lstm, rng), random_tensor({3, 4, 5}, rng), 45);
}

TEST(Lstm, GradientFlowsBackThroughTime) {
  // dy only at the last step: dx_0 comes through dh_next and dc_next alone.
  using testing_fixtures::directional_difference;
  using testing_fixtures::dot;
  std::mt19937_64 rng(46);
  const auto lstm = make_lstm(4, 5, 6);
  const LayerParams params = random_params(*lstm, rng);
  Tensor x = random_tensor({3, 4, 5}, rng);
  Tensor r({3, 4, 6});
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t j = 0; j < 6; ++j) r.data[(b * 4 + 3) * 6 + j] = uniform_from_bits(rng, 1.0f);
  }
  LayerCache cache;
  lstm->forward(params, x, cache);
  LayerGrads grads = zero_layer_grads(*lstm, params);
  const Tensor dx = lstm->backward(params, r, cache, grads);
  Tensor v(x.shape);  // step 0 only
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t j = 0; j < 5; ++j) v.data[b * 4 * 5 + j] = uniform_from_bits(rng, 1.0f);
  }
  const auto f = [&] {
    LayerCache scratch;
    return dot(lstm->forward(params, x, scratch), r);
  };
  const double analytic = dot(dx, v), numeric = directional_difference(f, x, v, 1e-3);
  EXPECT_GT(std::abs(analytic), 1e-3);
  testing_fixtures::expect_close(analytic, numeric, "step-0 input gradient from the last step");
}

TEST(Lstm, BackwardAddsIntoGradients) {
  std::mt19937_64 rng(47);
  const auto lstm = make_lstm(3, 4, 5);
  const LayerParams params = random_params(*lstm, rng);
  LayerCache cache;
  const Tensor y = lstm->forward(params, random_tensor({2, 3, 4}, rng), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 3, 5}));
  const Tensor dy = random_tensor(y.shape, rng);
  LayerGrads grads = zero_layer_grads(*lstm, params);
  const Tensor dx = lstm->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{2, 3, 4}));
  const LayerGrads once = grads;
  const Tensor dx_again = lstm->backward(params, dy, cache, grads);
  EXPECT_EQ(dx_again.data, dx.data);
  for (size_t p = 0; p < 2; ++p) {
    for (size_t i = 0; i < once[p].dense.data.size(); ++i) {
      EXPECT_NEAR(grads[p].dense.data[i], 2.0f * once[p].dense.data[i], 1e-5) << "parameter " << p;
    }
  }
}

TEST(Lstm, RejectsBadShapes) {
  EXPECT_THROW(make_lstm(0, 3, 4), InternalError);
  EXPECT_THROW(make_lstm(2, 0, 4), InternalError);
  EXPECT_THROW(make_lstm(2, 3, 0), InternalError);
  std::mt19937_64 rng(48);
  const auto lstm = make_lstm(2, 3, 4);
  LayerParams params;
  lstm->init_params(params, rng);
  LayerCache cache;
  EXPECT_THROW(lstm->forward(params, Tensor({1, 3, 3}), cache), InternalError);
  EXPECT_THROW(lstm->forward(params, Tensor({1, 6}), cache), InternalError);
  lstm->forward(params, Tensor({1, 2, 3}), cache);
  LayerGrads grads = zero_layer_grads(*lstm, params);
  EXPECT_THROW(lstm->backward(params, Tensor({1, 2, 3}), cache, grads), InternalError);
  params.pop_back();
  EXPECT_THROW(lstm->forward(params, Tensor({1, 2, 3}), cache), InternalError);
}

}  // namespace
}  // namespace trainsim
