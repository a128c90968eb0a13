// Linear, ReLU, flatten and the identity layers: hand-computed cases and
// finite-difference gradients.
#include <gtest/gtest.h>

#include "exec/tensor/kernels_impl.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::tensor_of;
using testing_fixtures::expect_layer_gradients;
using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

TEST(Linear, ComputesXTimesWTransposedPlusBias) {
  // W = [[1, 2], [3, 4]], b = [0.5, -1], x = [1, 2]:
  // y0 = 1·1 + 2·2 + 0.5 = 5.5, y1 = 1·3 + 2·4 - 1 = 10.
  const auto linear = make_linear(2, 2, true);
  const LayerParams params{tensor_of({2, 2}, {1, 2, 3, 4}), tensor_of({2}, {0.5f, -1})};
  LayerCache cache;
  const Tensor y = linear->forward(params, tensor_of({1, 2}, {1, 2}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_FLOAT_EQ(y.data[0], 5.5f);
  EXPECT_FLOAT_EQ(y.data[1], 10.0f);
}

TEST(Linear, BackwardAddsDyTransposedXAndReturnsDyW) {
  // dy = [1, -1], x = [1, 2], W = [[1, 2], [3, 4]]:
  // dW = dyᵀ·x = [[1, 2], [-1, -2]], db = [1, -1], dx = dy·W = [1 - 3, 2 - 4] = [-2, -2].
  // A second backward adds: dW and db double, dx does not.
  const auto linear = make_linear(2, 2, true);
  const LayerParams params{tensor_of({2, 2}, {1, 2, 3, 4}), tensor_of({2}, {0.5f, -1})};
  LayerCache cache;
  linear->forward(params, tensor_of({1, 2}, {1, 2}), cache);
  LayerGrads grads = zero_layer_grads(*linear, params);
  const Tensor dy = tensor_of({1, 2}, {1, -1});
  Tensor dx = linear->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.data, (std::vector<float>{-2, -2}));
  EXPECT_EQ(grads[0].dense.data, (std::vector<float>{1, 2, -1, -2}));
  EXPECT_EQ(grads[1].dense.data, (std::vector<float>{1, -1}));
  dx = linear->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.data, (std::vector<float>{-2, -2}));
  EXPECT_EQ(grads[0].dense.data, (std::vector<float>{2, 4, -2, -4}));
  EXPECT_EQ(grads[1].dense.data, (std::vector<float>{2, -2}));
}

TEST(Linear, WithoutBiasHasOnlyAWeight) {
  const auto linear = make_linear(3, 2, false);
  EXPECT_EQ(linear->param_shapes(), (std::vector<std::vector<int64_t>>{{2, 3}}));
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(1);
  const auto linear = make_linear(7, 5, true);
  LayerParams params;
  linear->init_params(params, rng);
  expect_layer_gradients(*linear, params, random_tensor({4, 7}, rng), 2);
}

TEST(Linear, ActsOnTheLastDimensionOfSequences) {
  // {B=2, T=3, 4} -> {2, 3, 5}: each of the 6 positions is one GEMM row.
  std::mt19937_64 rng(4);
  const auto linear = make_linear(4, 5, true);
  LayerParams params;
  linear->init_params(params, rng);
  LayerCache cache;
  const Tensor y = linear->forward(params, random_tensor({2, 3, 4}, rng), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 3, 5}));
  expect_layer_gradients(*linear, params, random_tensor({2, 3, 4}, rng), 5);
}

TEST(Relu, ZeroesNegativesAndTheirGradient) {
  // y = max(x, 0) = [0, 0, 2]; dx = dy where y > 0: [0, 0, 3].
  const auto relu = make_relu();
  LayerCache cache;
  const Tensor y = relu->forward({}, tensor_of({1, 3}, {-1, 0, 2}), cache);
  EXPECT_EQ(y.data, (std::vector<float>{0, 0, 2}));
  LayerGrads none;
  const Tensor dx = relu->backward({}, tensor_of({1, 3}, {5, 4, 3}), cache, none);
  EXPECT_EQ(dx.data, (std::vector<float>{0, 0, 3}));
}

TEST(Relu, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(6);
  expect_layer_gradients(*make_relu(), {}, random_tensor({3, 10}, rng), 7);
}

TEST(Flatten, KeepsTheBatchAndValuesAndRestoresTheShapeBackward) {
  const auto flatten = make_reshape({2, 2, 1}, {4});
  LayerCache cache;
  const Tensor x = tensor_of({2, 2, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor y = flatten->forward({}, x, cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(y.data, x.data);
  LayerGrads none;
  const Tensor dx = flatten->backward({}, y, cache, none);
  EXPECT_EQ(dx.shape, x.shape);
  EXPECT_EQ(dx.data, x.data);
}

TEST(Identity, PassesValuesAndGradientsThrough) {
  const auto identity = make_identity();
  LayerCache cache;
  const Tensor x = tensor_of({1, 3}, {1, -2, 3});
  EXPECT_EQ(identity->forward({}, x, cache).data, x.data);
  LayerGrads none;
  EXPECT_EQ(identity->backward({}, x, cache, none).data, x.data);
  EXPECT_TRUE(identity->param_shapes().empty());
}

}  // namespace
}  // namespace trainsim
