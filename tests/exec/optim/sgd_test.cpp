// SGD / momentum SGD against hand-computed steps (PyTorch's convention), and
// the gradient utilities: add, scale, clear, densify, flatten and back.
// Values are small dyadic fractions so every float operation is exact.
#include "exec/optim/sgd.hpp"

#include <gtest/gtest.h>

#include "model/error.hpp"

namespace trainsim {
namespace {

Tensor make_tensor(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor tensor(std::move(shape));
  tensor.data = std::move(values);
  return tensor;
}

ParamGrad dense_grad(std::vector<int64_t> shape, std::vector<float> values) {
  ParamGrad grad;
  grad.dense = make_tensor(std::move(shape), std::move(values));
  return grad;
}

ParamGrad sparse_grad(std::vector<int64_t> rows, int64_t width, std::vector<float> values) {
  ParamGrad grad;
  grad.sparse = true;
  const auto count = static_cast<int64_t>(rows.size());
  grad.rows = std::move(rows);
  grad.row_values = make_tensor({count, width}, std::move(values));
  return grad;
}

TEST(Sgd, PlainStepSubtractsLearningRateTimesGradient) {
  // w = [1, 2], g = [0.5, -1], lr = 0.5: w - lr·g = [1 - 0.25, 2 + 0.5] = [0.75, 2.5].
  Weights weights = {{make_tensor({2}, {1.0f, 2.0f})}};
  Gradients grads = {{dense_grad({2}, {0.5f, -1.0f})}};
  Sgd sgd({.learning_rate = 0.5});
  sgd.step(weights, grads, 0, 0);
  EXPECT_EQ(weights[0][0].data, (std::vector<float>{0.75f, 2.5f}));
}

TEST(Sgd, MomentumAccumulatesVelocityPyTorchStyle) {
  // μ = 0.5, lr = 0.25, w0 = 1, g = 1 every step (v starts at 0):
  // step 1: v = 0.5·0 + 1 = 1,     w = 1 - 0.25·1 = 0.75
  // step 2: v = 0.5·1 + 1 = 1.5,   w = 0.75 - 0.25·1.5 = 0.375
  // step 3: v = 0.5·1.5 + 1 = 1.75, w = 0.375 - 0.25·1.75 = -0.0625
  Weights weights = {{make_tensor({1}, {1.0f})}};
  Gradients grads = {{dense_grad({1}, {1.0f})}};
  Sgd sgd({.learning_rate = 0.25, .momentum = 0.5});
  const float expected_w[] = {0.75f, 0.375f, -0.0625f};
  const float expected_v[] = {1.0f, 1.5f, 1.75f};
  for (int step = 0; step < 3; ++step) {
    sgd.step(weights, grads, 0, 0);
    EXPECT_EQ(weights[0][0].data[0], expected_w[step]) << "step " << step + 1;
    EXPECT_EQ(sgd.velocity()[0][0].data[0], expected_v[step]) << "step " << step + 1;
  }
}

TEST(Sgd, WeightDecayAddsToTheGradientBeforeMomentum) {
  // w = 2, g = 0.5, wd = 0.25, μ = 0.5, lr = 0.5:
  // g' = 0.5 + 0.25·2 = 1; v = 1; w = 2 - 0.5·1 = 1.5.
  // step 2: g' = 0.5 + 0.25·1.5 = 0.875; v = 0.5·1 + 0.875 = 1.375; w = 1.5 - 0.6875 = 0.8125.
  Weights weights = {{make_tensor({1}, {2.0f})}};
  Gradients grads = {{dense_grad({1}, {0.5f})}};
  Sgd sgd({.learning_rate = 0.5, .momentum = 0.5, .weight_decay = 0.25});
  sgd.step(weights, grads, 0, 0);
  EXPECT_EQ(weights[0][0].data[0], 1.5f);
  sgd.step(weights, grads, 0, 0);
  EXPECT_EQ(weights[0][0].data[0], 0.8125f);
}

TEST(Sgd, TouchesOnlyTheLayerRange) {
  // Layers 0 and 2 are outside [1, 1]: unchanged although their gradients are 1.
  Weights weights = {{make_tensor({1}, {1.0f})}, {make_tensor({1}, {1.0f})}, {make_tensor({1}, {1.0f})}};
  Gradients grads = {{dense_grad({1}, {1.0f})}, {dense_grad({1}, {1.0f})}, {dense_grad({1}, {1.0f})}};
  Sgd sgd({.learning_rate = 0.5});
  sgd.step(weights, grads, 1, 1);
  EXPECT_EQ(weights[0][0].data[0], 1.0f);
  EXPECT_EQ(weights[1][0].data[0], 0.5f);
  EXPECT_EQ(weights[2][0].data[0], 1.0f);
}

TEST(Sgd, SparseMomentumIsLazyAndSumsRepeatedRows) {
  // Table 3 rows x 2, all ones; lr = 0.5, μ = 0.5.
  // Step 1 touches row 0 twice ([1,0] and [1,2] -> summed [2,2]) and row 2 once ([0.5,0.5]):
  //   row 0: v = [2,2],     w = 1 - 0.5·2 = [0, 0]
  //   row 2: v = [0.5,0.5], w = 1 - 0.25 = [0.75, 0.75]
  //   row 1 untouched: w = [1, 1], v = [0, 0]
  // Step 2 touches row 1 only with [1, 1]:
  //   row 1: v = [1,1], w = [0.5, 0.5]; rows 0 and 2 keep w and v (lazy: no decay of v, no move).
  Weights weights = {{make_tensor({3, 2}, std::vector<float>(6, 1.0f))}};
  Sgd sgd({.learning_rate = 0.5, .momentum = 0.5});
  Gradients step1 = {{sparse_grad({0, 2, 0}, 2, {1.0f, 0.0f, 0.5f, 0.5f, 1.0f, 2.0f})}};
  sgd.step(weights, step1, 0, 0);
  EXPECT_EQ(weights[0][0].data, (std::vector<float>{0, 0, 1, 1, 0.75f, 0.75f}));
  EXPECT_EQ(sgd.velocity()[0][0].data, (std::vector<float>{2, 2, 0, 0, 0.5f, 0.5f}));
  Gradients step2 = {{sparse_grad({1}, 2, {1.0f, 1.0f})}};
  sgd.step(weights, step2, 0, 0);
  EXPECT_EQ(weights[0][0].data, (std::vector<float>{0, 0, 0.5f, 0.5f, 0.75f, 0.75f}));
  EXPECT_EQ(sgd.velocity()[0][0].data, (std::vector<float>{2, 2, 1, 1, 0.5f, 0.5f}));
}

TEST(Sgd, SparseStepEqualsDenseStepWithoutMomentum) {
  // Without momentum or decay the lazy rule is exact SGD: the densified gradient gives the same weights.
  Weights sparse_weights = {{make_tensor({4, 1}, {1.0f, 2.0f, 3.0f, 4.0f})}};
  Weights dense_weights = sparse_weights;
  const ParamGrad sparse = sparse_grad({3, 1, 3}, 1, {0.5f, 1.0f, 0.25f});
  Gradients sparse_grads = {{sparse}};
  Gradients dense_grads = {{dense_grad({4, 1}, densify_gradient(sparse, {4, 1}).data)}};
  Sgd a({.learning_rate = 0.5});
  Sgd b({.learning_rate = 0.5});
  a.step(sparse_weights, sparse_grads, 0, 0);
  b.step(dense_weights, dense_grads, 0, 0);
  // Row 1: 2 - 0.5·1 = 1.5; row 3: 4 - 0.5·0.75 = 3.625.
  EXPECT_EQ(sparse_weights[0][0].data, (std::vector<float>{1.0f, 1.5f, 3.0f, 3.625f}));
  EXPECT_EQ(sparse_weights[0][0].data, dense_weights[0][0].data);
}

TEST(Sgd, ARefusedSparseRowLeavesLaterMergesExact) {
  // One thread merges for every table it steps: a gradient refused for a row
  // outside its table, then a larger table, then the first again, each with
  // a repeated row (lr = 1, no momentum: w -= the row's sum).
  Sgd sgd({.learning_rate = 1.0});
  Weights small = {{make_tensor({2, 1}, {10.0f, 20.0f})}};
  Gradients bad = {{sparse_grad({1, 0, 1, 5}, 1, {1.0f, 2.0f, 3.0f, 4.0f})}};
  EXPECT_THROW(sgd.step(small, bad, 0, 0), InternalError);
  Weights large = {{make_tensor({6, 1}, {0, 0, 0, 0, 0, 0})}};
  Gradients repeated = {{sparse_grad({5, 1, 5}, 1, {1.0f, 2.0f, 3.0f})}};
  sgd.step(large, repeated, 0, 0);
  EXPECT_EQ(large[0][0].data, (std::vector<float>{0, -2, 0, 0, 0, -4}));
  Gradients again = {{sparse_grad({1, 0, 1}, 1, {1.0f, 2.0f, 3.0f})}};
  sgd.step(small, again, 0, 0);
  EXPECT_EQ(small[0][0].data, (std::vector<float>{8.0f, 16.0f}));
}

TEST(Sgd, RejectsBadOptionsNamingTheKey) {
  EXPECT_THROW(Sgd({.learning_rate = 0}), InputError);
  EXPECT_THROW(Sgd({.learning_rate = 0.1, .momentum = 1.0}), InputError);
  EXPECT_THROW(Sgd({.learning_rate = 0.1, .weight_decay = -1}), InputError);
  try {
    Sgd({.learning_rate = 0.1, .momentum = -0.5});
    FAIL() << "no InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.where(), "--set momentum");
  }
}

TEST(GradientUtils, DensifyAddsRepeatedRows) {
  // rows {2, 0, 2} of width 2: row 2 = [1,2] + [5,6] = [6,8]; row 0 = [3,4]; row 1 = 0.
  const ParamGrad grad = sparse_grad({2, 0, 2}, 2, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(densify_gradient(grad, {3, 2}).data, (std::vector<float>{3, 4, 0, 0, 6, 8}));
}

TEST(GradientUtils, AddCoversEveryDenseSparseCombination) {
  // dense + dense: [1,2] + [3,4] = [4,6].
  Gradients a = {{dense_grad({2}, {1, 2})}};
  add_gradients(a, Gradients{{dense_grad({2}, {3, 4})}}, 0, 0);
  EXPECT_EQ(a[0][0].dense.data, (std::vector<float>{4, 6}));
  // sparse + sparse: rows appended, {0} then {1, 0}; densified {2 rows x 1}: row0 = 1 + 3, row1 = 2.
  Gradients s = {{sparse_grad({0}, 1, {1})}};
  add_gradients(s, Gradients{{sparse_grad({1, 0}, 1, {2, 3})}}, 0, 0);
  EXPECT_TRUE(s[0][0].sparse);
  EXPECT_EQ(s[0][0].rows, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(densify_gradient(s[0][0], {2, 1}).data, (std::vector<float>{4, 2}));
  // sparse into dense: [1,1] + row 1 gets 5 -> [1, 6].
  Gradients d = {{dense_grad({2, 1}, {1, 1})}};
  add_gradients(d, Gradients{{sparse_grad({1}, 1, {5})}}, 0, 0);
  EXPECT_EQ(d[0][0].dense.data, (std::vector<float>{1, 6}));
  // dense into sparse: into becomes dense [1, 1] + row 0 gets 7 -> [8, 1].
  Gradients t = {{sparse_grad({0}, 1, {7})}};
  add_gradients(t, Gradients{{dense_grad({2, 1}, {1, 1})}}, 0, 0);
  EXPECT_FALSE(t[0][0].sparse);
  EXPECT_EQ(t[0][0].dense.data, (std::vector<float>{8, 1}));
}

TEST(GradientUtils, ScaleAndClearActOnDenseAndSparse) {
  Gradients grads = {{dense_grad({2}, {2, 4}), sparse_grad({1}, 2, {8, 16})}};
  scale_gradients(grads, 0.5f, 0, 0);
  EXPECT_EQ(grads[0][0].dense.data, (std::vector<float>{1, 2}));
  EXPECT_EQ(grads[0][1].row_values.data, (std::vector<float>{4, 8}));
  clear_gradients(grads, 0, 0);
  EXPECT_EQ(grads[0][0].dense.data, (std::vector<float>{0, 0}));
  EXPECT_TRUE(grads[0][1].rows.empty());
  EXPECT_TRUE(grads[0][1].row_values.data.empty());
  EXPECT_EQ(grads[0][1].row_values.shape, (std::vector<int64_t>{0, 2}));
}

TEST(GradientUtils, FlattenOrdersLayerThenParameterThenRowMajorAndRoundTrips) {
  // Layer 0: weight {2,2} = [1,2,3,4], bias {2} = [5,6]; layer 1 has no parameters;
  // layer 2: a sparse table (skipped) and a bias [7]. Range [0, 2] -> [1..7].
  Gradients grads = {{dense_grad({2, 2}, {1, 2, 3, 4}), dense_grad({2}, {5, 6})},
                     {},
                     {sparse_grad({0}, 1, {99}), dense_grad({1}, {7})}};
  EXPECT_EQ(flat_gradient_size(grads, 0, 2), 7);
  EXPECT_EQ(flatten_gradients(grads, 0, 2), (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(flatten_gradients(grads, 2, 2), (std::vector<float>{7}));
  const std::vector<float> doubled = {2, 4, 6, 8, 10, 12, 14};
  unflatten_gradients(doubled, grads, 0, 2);
  EXPECT_EQ(grads[0][0].dense.data, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(grads[0][1].dense.data, (std::vector<float>{10, 12}));
  EXPECT_EQ(grads[2][1].dense.data, (std::vector<float>{14}));
  EXPECT_EQ(grads[2][0].row_values.data, (std::vector<float>{99}));  // sparse untouched
}

}  // namespace
}  // namespace trainsim
