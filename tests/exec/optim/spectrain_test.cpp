// SpecTrain (seed 000 eqs. 1-6) against hand-computed cases: the smoothed
// gradient, the prediction, the version differences, and the exactness of
// the prediction under constant gradients.
#include "exec/optim/spectrain.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

Weights one_layer(std::vector<float> values) {
  Tensor t({static_cast<int64_t>(values.size())});
  t.data = std::move(values);
  return {{t}};
}

Gradients one_layer_grad(std::vector<float> values) {
  ParamGrad g;
  g.dense = Tensor({static_cast<int64_t>(values.size())});
  g.dense.data = std::move(values);
  return {{g}};
}

TEST(SpecTrain, VersionDifferencesFollowEquationsFiveAndSix) {
  // Seed 000's example: N = 3 GPUs, the forward on GPU 0 has s = 2·3 − 0 − 2 = 4.
  EXPECT_EQ(SpecTrain::forward_version_difference(3, 0), 4);
  EXPECT_EQ(SpecTrain::forward_version_difference(3, 2), 2);  // 6 − 2 − 2
  EXPECT_EQ(SpecTrain::backward_version_difference(3, 0), 0);
  EXPECT_EQ(SpecTrain::backward_version_difference(3, 2), 2);
  // The last stage runs its forward and backward on the same prediction: 2N − (N−1) − 2 = N − 1.
  EXPECT_EQ(SpecTrain::forward_version_difference(4, 3), SpecTrain::backward_version_difference(4, 3));
  // A single stage never predicts: s = 2 − 0 − 2 = 0.
  EXPECT_EQ(SpecTrain::forward_version_difference(1, 0), 0);
}

TEST(SpecTrain, SmoothedGradientFollowsEquationOneFromZero) {
  // γ = 0.75, g_1 = 4, g_2 = -8, v_0 = 0:
  // v_1 = 0.75·0 + 0.25·4 = 1;  v_2 = 0.75·1 + 0.25·(−8) = −1.25.
  const Weights weights = one_layer({0.0f});
  SpecTrain spectrain({.learning_rate = 0.5, .gamma = 0.75});
  spectrain.observe(weights, one_layer_grad({4.0f}), 0, 0);
  EXPECT_EQ(spectrain.smoothed_gradient()[0][0].data[0], 1.0f);
  spectrain.observe(weights, one_layer_grad({-8.0f}), 0, 0);
  EXPECT_EQ(spectrain.smoothed_gradient()[0][0].data[0], -1.25f);
  // Eq. 4 with W_t = 10, s = 4, η = 0.5: Ŵ = 10 − 4·0.5·(−1.25) = 12.5.
  EXPECT_EQ(spectrain.predict(one_layer({10.0f}), 4, 0, 0)[0][0].data[0], 12.5f);
}

TEST(SpecTrain, PredictionBeforeAnyGradientIsTheWeightsThemselves) {
  // v_0 = 0, so Ŵ = W − s·η·0 = W.
  const SpecTrain spectrain({.learning_rate = 0.5, .gamma = 0.5});
  EXPECT_EQ(spectrain.predict(one_layer({3.0f, -1.0f}), 4, 0, 0)[0][0].data, (std::vector<float>{3.0f, -1.0f}));
}

TEST(SpecTrain, ConstantGradientPredictionEqualsWeightsSUpdatesLater) {
  // Constant g and v already equal to g: eq. 1 keeps v = γg + (1−γ)g = g. SGD
  // (eq. 2) applied s times gives W_{t+s} = W_t − s·η·g, and eq. 4 predicts
  // Ŵ_{t+s} = W_t − s·η·v_{t−1} = W_t − s·η·g: equal. With W = [10, −3],
  // g = [2, −0.5], η = 0.25 every product is a dyadic fraction, so equality
  // is exact in float. Checked for every s a 3-stage pipeline uses (0..4).
  const std::vector<float> g = {2.0f, -0.5f};
  for (int64_t s = 0; s <= SpecTrain::forward_version_difference(3, 0); ++s) {
    Weights weights = one_layer({10.0f, -3.0f});
    SpecTrain spectrain({.learning_rate = 0.25, .gamma = 0.5});
    spectrain.set_smoothed_gradient(one_layer(g));
    const Weights predicted = spectrain.predict(weights, s, 0, 0);
    Sgd sgd({.learning_rate = 0.25});
    for (int64_t update = 0; update < s; ++update) {
      sgd.step(weights, one_layer_grad(g), 0, 0);
      spectrain.observe(weights, one_layer_grad(g), 0, 0);
    }
    EXPECT_EQ(predicted[0][0].data, weights[0][0].data) << "s = " << s;
    EXPECT_EQ(spectrain.smoothed_gradient()[0][0].data, g);
  }
  // s = 4 by hand: 10 − 4·0.25·2 = 8, −3 + 4·0.25·0.5 = −2.5.
  SpecTrain spectrain({.learning_rate = 0.25, .gamma = 0.5});
  spectrain.set_smoothed_gradient(one_layer(g));
  EXPECT_EQ(spectrain.predict(one_layer({10.0f, -3.0f}), 4, 0, 0)[0][0].data, (std::vector<float>{8.0f, -2.5f}));
}

TEST(SpecTrain, SparseGradientSmoothsLikeItsDenseEquivalent) {
  // Table 2 rows x 1, γ = 0.5; step 1 dense [2, 4] -> v = [1, 2].
  // Step 2 sparse rows {1, 1} values {2, 2} (dense [0, 4]) -> v = 0.5·[1,2] + 0.5·[0,4] = [0.5, 3].
  Tensor table({2, 1});
  const Weights weights = {{table}};
  SpecTrain spectrain({.learning_rate = 1.0, .gamma = 0.5});
  ParamGrad dense;
  dense.dense = Tensor({2, 1});
  dense.dense.data = {2.0f, 4.0f};
  spectrain.observe(weights, Gradients{{dense}}, 0, 0);
  ParamGrad sparse;
  sparse.sparse = true;
  sparse.rows = {1, 1};
  sparse.row_values = Tensor({2, 1});
  sparse.row_values.data = {2.0f, 2.0f};
  spectrain.observe(weights, Gradients{{sparse}}, 0, 0);
  EXPECT_EQ(spectrain.smoothed_gradient()[0][0].data, (std::vector<float>{0.5f, 3.0f}));
}

TEST(SpecTrain, PredictsOnlyTheStageLayers) {
  // Two layers, v = 1 on both, s = 2, η = 0.5: layer 1 moves by 1, layer 0 (outside [1,1]) does not.
  Weights weights = {one_layer({5.0f})[0], one_layer({5.0f})[0]};
  SpecTrain spectrain({.learning_rate = 0.5, .gamma = 0.5});
  spectrain.set_smoothed_gradient({one_layer({1.0f})[0], one_layer({1.0f})[0]});
  const Weights predicted = spectrain.predict(weights, 2, 1, 1);
  EXPECT_EQ(predicted[0][0].data[0], 5.0f);
  EXPECT_EQ(predicted[1][0].data[0], 4.0f);
}

TEST(SpecTrain, PredictsIntoAReusedBufferOnlyTheRangesLayers) {
  // s = 2, η = 0.5, v = 1: layer 1 predicted 5 − 1 = 4 into the buffer; layer 0
  // keeps what the buffer held; a later call reuses the buffer's storage.
  Weights weights = {one_layer({5.0f})[0], one_layer({5.0f, 7.0f})[0]};
  SpecTrain spectrain({.learning_rate = 0.5, .gamma = 0.5});
  spectrain.set_smoothed_gradient({one_layer({1.0f})[0], one_layer({1.0f, -2.0f})[0]});
  Weights buffer;
  spectrain.predict_into(weights, 2, 1, 1, buffer);
  ASSERT_EQ(buffer.size(), 2u);
  EXPECT_TRUE(buffer[0].empty());
  EXPECT_EQ(buffer[1][0].data, (std::vector<float>{4.0f, 9.0f}));
  const float* storage = buffer[1][0].data.data();
  weights[1][0].data = {1.0f, 1.0f};
  spectrain.predict_into(weights, 0, 1, 1, buffer);  // s = 0: W itself
  EXPECT_EQ(buffer[1][0].data, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(buffer[1][0].data.data(), storage);
  EXPECT_EQ(spectrain.predict(weights, 2, 1, 1)[1][0].data, (std::vector<float>{0.0f, 3.0f}));
}

TEST(SpecTrain, RejectsGammaOutsideTheUnitInterval) {
  EXPECT_THROW(SpecTrain({.learning_rate = 0.1, .gamma = 0.0}), InputError);
  EXPECT_THROW(SpecTrain({.learning_rate = 0.1, .gamma = 1.5}), InputError);
  EXPECT_NO_THROW(SpecTrain({.learning_rate = 0.1, .gamma = 1.0}));
}

// The dense form of eq. 1 and eq. 4, as SpecTrain computed it before its
// sparse rows decayed lazily: every row of v decays at every step.
struct DenseReference {
  float gamma, rest;
  std::vector<float> v;
  void observe_rows(const std::vector<int64_t>& rows, const std::vector<float>& values, int64_t width) {
    for (float& x : v) x *= gamma;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t j = 0; j < width; ++j) v[rows[r] * width + j] += rest * values[r * width + j];
    }
  }
  void observe_dense(const std::vector<float>& g) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = gamma * v[i] + rest * g[i];
  }
};

// Sparse steps (rows repeating, most rows untouched) and dense steps in a
// random order: v, the whole prediction and a prediction of some rows only
// are the dense form's, bit for bit.
TEST(SpecTrain, LazilyDecayedRowsEqualTheDenseFormBitForBit) {
  constexpr int64_t kRows = 40, kWidth = 3;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  Tensor table({kRows, kWidth});
  for (float& x : table.data) x = value(rng);
  const Weights weights = {{table}};
  SpecTrain spectrain({.learning_rate = 0.3, .gamma = 0.7});
  DenseReference ref{static_cast<float>(0.7), static_cast<float>(1.0 - 0.7),
                     std::vector<float>(static_cast<size_t>(kRows * kWidth), 0.0f)};
  for (int step = 0; step < 60; ++step) {
    ParamGrad g;
    if (step % 7 == 3) {
      g.dense = Tensor({kRows, kWidth});
      for (float& x : g.dense.data) x = value(rng);
      ref.observe_dense(g.dense.data);
    } else {
      g.sparse = true;
      const auto touched = static_cast<int64_t>(rng() % 6);
      for (int64_t i = 0; i < touched; ++i) g.rows.push_back(static_cast<int64_t>(rng() % 8) * 5);  // repeats
      g.row_values = Tensor({touched, kWidth});
      for (float& x : g.row_values.data) x = value(rng);
      ref.observe_rows(g.rows, g.row_values.data, kWidth);
    }
    spectrain.observe(weights, Gradients{{g}}, 0, 0);
    ASSERT_EQ(spectrain.smoothed_gradient()[0][0].data, ref.v) << "step " << step;
    const auto step_size = static_cast<float>(2 * 0.3);
    std::vector<float> expected(table.data.size());
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = table.data[i] - step_size * ref.v[i];
    ASSERT_EQ(spectrain.predict(weights, 2, 0, 0)[0][0].data, expected) << "step " << step;
    // Rows 5 and 35 only: the others keep what the buffer held (zeros).
    const std::vector<int64_t> rows = {5, 35};
    Weights buffer;
    spectrain.predict_into(weights, 2, 0, 0, buffer, {.sparse_layer = 0, .rows = rows, .skip = {}});
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < kWidth; ++j) {
        const size_t i = static_cast<size_t>(r * kWidth + j);
        ASSERT_EQ(buffer[0][0].data[i], (r == 5 || r == 35) ? expected[i] : 0.0f) << "step " << step << " row " << r;
      }
    }
  }
}

TEST(SpecTrain, APredictionSkipsTheLayersItIsToldTo) {
  Weights weights = {one_layer({5.0f})[0], one_layer({5.0f})[0]};
  SpecTrain spectrain({.learning_rate = 0.5, .gamma = 0.5});
  spectrain.set_smoothed_gradient({one_layer({1.0f})[0], one_layer({1.0f})[0]});
  Weights buffer;
  spectrain.predict_into(weights, 2, 0, 1, buffer, {.sparse_layer = -1, .rows = {}, .skip = {1, 0}});
  EXPECT_TRUE(buffer[0].empty());
  EXPECT_EQ(buffer[1][0].data, (std::vector<float>{4.0f}));
}

}  // namespace
}  // namespace trainsim
