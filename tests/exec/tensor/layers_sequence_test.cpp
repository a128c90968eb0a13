// Multi-head self-attention, token embedding and the sinusoidal position
// encoding: hand-computed cases, masking, errors and finite-difference gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

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

// W_q = W_k = W_v = I, W_o as given, biases zero except b_o.
LayerParams attention_params(const Tensor& w_o, const Tensor& b_o) {
  const Tensor identity = tensor_of({2, 2}, {1, 0, 0, 1}), zero({2});
  return {identity, zero, identity, zero, identity, zero, w_o, b_o};
}

// W_q and W_k in ±2 so that the softmax is far from uniform and the paths
// through Q and K weigh in the input gradient; the others in ±0.7.
LayerParams random_params(const ExecLayer& layer, std::mt19937_64& rng) {
  LayerParams params;
  for (const auto& shape : layer.param_shapes()) {
    const float range = params.size() == 0 || params.size() == 2 ? 2.0f : 0.7f;
    params.push_back(random_tensor(shape, rng, -range, range));
  }
  return params;
}

TEST(Attention, OneHeadByHand) {
  // x = [[1, 0], [0, 1]], so Q = K = V = x and S = x·xᵀ/√2 = [[a, 0], [0, a]], a = 0.7071068.
  // Row 0: softmax [a, 0] = [e^a, 1]/(e^a + 1) = [0.6697615, 0.3302385] (e^a = 2.0281150);
  // O = P·V = [[0.6697615, 0.3302385], [0.3302385, 0.6697615]].
  // W_o swaps the features and b_o = [0.5, -0.5]: y = [[0.8302385, 0.1697615], [1.1697615, -0.1697615]].
  // Causal: row 0 sees only itself, O[0] = V[0] = [1, 0], y[0] = [0.5, 0.5]; row 1 is unchanged.
  const LayerParams params = attention_params(tensor_of({2, 2}, {0, 1, 1, 0}), tensor_of({2}, {0.5f, -0.5f}));
  const Tensor x = tensor_of({1, 2, 2}, {1, 0, 0, 1});
  LayerCache cache;
  const Tensor y = make_attention(2, 2, 1, false)->forward(params, x, cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2, 2}));
  expect_values_near(y, {0.8302385f, 0.1697615f, 1.1697615f, -0.1697615f}, 1e-6);
  const Tensor masked = make_attention(2, 2, 1, true)->forward(params, x, cache);
  expect_values_near(masked, {0.5f, 0.5f, 1.1697615f, -0.1697615f}, 1e-6);
}

TEST(Attention, TwoHeadsByHand) {
  // d = 2, heads = 2: head h attends with feature h alone, scale 1/√1 = 1; x = [[1, 0], [0, 1]].
  // Head 0: q = k = v = [1, 0]; row 0 scores [1, 0] -> [0.7310586, 0.2689414], o = 0.7310586;
  //         row 1 scores [0, 0] -> [0.5, 0.5], o = 0.5.
  // Head 1: q = k = v = [0, 1]; row 0 scores [0, 0] -> o = 0.5; row 1 scores [0, 1] -> o = 0.7310586.
  // W_o = I, b_o = 0: y = [[0.7310586, 0.5], [0.5, 0.7310586]]. Causal: row 0 = V[0] = [1, 0].
  const LayerParams params = attention_params(tensor_of({2, 2}, {1, 0, 0, 1}), Tensor({2}));
  const Tensor x = tensor_of({1, 2, 2}, {1, 0, 0, 1});
  LayerCache cache;
  expect_values_near(make_attention(2, 2, 2, false)->forward(params, x, cache), {0.7310586f, 0.5f, 0.5f, 0.7310586f},
                     1e-6);
  expect_values_near(make_attention(2, 2, 2, true)->forward(params, x, cache), {1, 0, 0.5f, 0.7310586f}, 1e-6);
}

TEST(Attention, CausalMaskHidesLaterTokens) {
  std::mt19937_64 rng(21);
  for (bool causal : {true, false}) {
    const auto attention = make_attention(3, 8, 2, causal);
    const LayerParams params = random_params(*attention, rng);
    Tensor x = random_tensor({2, 3, 8}, rng);
    LayerCache cache;
    const Tensor before = attention->forward(params, x, cache);
    for (int64_t j = 0; j < 8; ++j) x.data[2 * 8 + j] += 0.5f;  // sample 0, token 2
    const Tensor after = attention->forward(params, x, cache);
    double first_change = 0.0, last_change = 0.0, other_sample_change = 0.0;
    for (int64_t j = 0; j < 8; ++j) {
      first_change += std::abs(after.data[j] - before.data[j]);
      first_change += std::abs(after.data[8 + j] - before.data[8 + j]);
      last_change += std::abs(after.data[16 + j] - before.data[16 + j]);
      for (int64_t t = 0; t < 3; ++t) other_sample_change += std::abs(after.data[24 + t * 8 + j] - before.data[24 + t * 8 + j]);
    }
    EXPECT_GT(last_change, 1e-3) << "causal " << causal;
    EXPECT_EQ(other_sample_change, 0.0) << "causal " << causal;
    if (causal) {
      EXPECT_EQ(first_change, 0.0);
    } else {
      EXPECT_GT(first_change, 1e-3);
    }
  }
}

TEST(Attention, InitialisesProjectionsAsFourLinears) {
  const auto attention = make_attention(4, 6, 3, false);
  EXPECT_EQ(attention->param_shapes(),
            (std::vector<std::vector<int64_t>>{{6, 6}, {6}, {6, 6}, {6}, {6, 6}, {6}, {6, 6}, {6}}));
  std::mt19937_64 rng(22), linear_rng(22);
  LayerParams params;
  attention->init_params(params, rng);
  ASSERT_EQ(params.size(), 8u);
  const auto linear = make_linear(6, 6, true);
  for (size_t p = 0; p < 8; p += 2) {
    LayerParams expected;
    linear->init_params(expected, linear_rng);
    EXPECT_EQ(params[p].data, expected[0].data) << "weight " << p;
    EXPECT_EQ(params[p + 1].data, expected[1].data) << "bias " << p + 1;
  }
  const float bound = 1.0f / std::sqrt(6.0f);
  for (const Tensor& t : params) {
    for (float v : t.data) EXPECT_LE(std::abs(v), bound);
  }
}

TEST(Attention, RejectsBadShapes) {
  EXPECT_THROW(make_attention(4, 6, 4, false), InternalError);
  EXPECT_THROW(make_attention(4, 6, 0, false), InternalError);
  EXPECT_THROW(make_attention(0, 6, 2, false), InternalError);
  std::mt19937_64 rng(23);
  const auto attention = make_attention(3, 4, 2, false);
  LayerParams params;
  attention->init_params(params, rng);
  LayerCache cache;
  EXPECT_THROW(attention->forward(params, Tensor({2, 4, 4}), cache), InternalError);
  EXPECT_THROW(attention->forward(params, Tensor({2, 12}), cache), InternalError);
  params.pop_back();
  EXPECT_THROW(attention->forward(params, Tensor({2, 3, 4}), cache), InternalError);
}

TEST(Attention, BackwardAddsIntoGradients) {
  std::mt19937_64 rng(24);
  const auto attention = make_attention(3, 4, 2, true);
  const LayerParams params = random_params(*attention, rng);
  LayerCache cache;
  const Tensor y = attention->forward(params, random_tensor({2, 3, 4}, rng), cache);
  const Tensor dy = random_tensor(y.shape, rng);
  LayerGrads grads = zero_layer_grads(*attention, params);
  const Tensor dx = attention->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.shape, y.shape);
  const LayerGrads once = grads;
  attention->backward(params, dy, cache, grads);
  for (size_t p = 0; p < 8; ++p) {
    for (size_t i = 0; i < once[p].dense.data.size(); ++i) {
      EXPECT_NEAR(grads[p].dense.data[i], 2.0f * once[p].dense.data[i], 1e-5) << "parameter " << p;
    }
  }
}

// Checks dx and the 8 parameter gradients of `attention` on a {3, 4, 8} input
// as expect_layer_gradients does, with a step of 3e-3. b_k's gradient is
// exactly 0 (one shift of every key's score in a row leaves the softmax as it
// is), so there the analytic value must vanish and the difference stay at
// float32 noise, which is what it measures.
void expect_attention_gradients(bool causal, uint64_t seed) {
  using testing_fixtures::directional_difference;
  using testing_fixtures::dot;
  using testing_fixtures::expect_close;
  using testing_fixtures::grad_dot;
  constexpr double eps = 3e-3;
  std::mt19937_64 rng(seed);
  const auto attention = make_attention(4, 8, 2, causal);
  LayerParams params = random_params(*attention, rng);
  Tensor x = random_tensor({3, 4, 8}, rng);
  LayerCache cache;
  const Tensor r = random_tensor(attention->forward(params, x, cache).shape, rng);
  LayerGrads grads = zero_layer_grads(*attention, params);
  const Tensor dx = attention->backward(params, r, cache, grads);
  const auto f = [&] {
    LayerCache scratch;
    return dot(attention->forward(params, x, scratch), r);
  };
  ASSERT_EQ(dx.shape, x.shape);
  const Tensor v = random_tensor(x.shape, rng);
  expect_close(dot(dx, v), directional_difference(f, x, v, eps), "input gradient");
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor w = random_tensor(params[k].shape, rng);
    const double analytic = grad_dot(grads[k], w), numeric = directional_difference(f, params[k], w, eps);
    if (k == 3) {
      EXPECT_NEAR(analytic, 0.0, 1e-5) << "b_k gradient";
      EXPECT_NEAR(numeric, 0.0, 1e-3) << "b_k gradient";
    } else {
      EXPECT_GT(std::abs(analytic), 1e-3) << "parameter " << k << " gradient";
      expect_close(analytic, numeric, "parameter " + std::to_string(k) + " gradient");
    }
  }
}

TEST(Attention, GradientsMatchFiniteDifferences) { expect_attention_gradients(false, 25); }

TEST(Attention, CausalGradientsMatchFiniteDifferences) { expect_attention_gradients(true, 27); }

TEST(Embedding, LooksUpTableRows) {
  // Table rows [0, 1], [2, 3], [4, 5]; ids [[2, 0], [1, 2]].
  const auto embedding = make_embedding("emb", 3, 2);
  EXPECT_EQ(embedding->param_shapes(), (std::vector<std::vector<int64_t>>{{3, 2}}));
  EXPECT_FALSE(embedding->sparse());
  const LayerParams params{tensor_of({3, 2}, {0, 1, 2, 3, 4, 5})};
  LayerCache cache;
  const Tensor y = embedding->forward(params, tensor_of({2, 2}, {2, 0, 1, 2}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{4, 5, 0, 1, 2, 3, 4, 5}));
}

TEST(Embedding, RepeatedIdsAddTheirGradients) {
  // ids [[1, 1], [0, 1]], dy rows [1, 2], [10, 20], [100, 200], [1000, 2000]:
  // row 0 gets [100, 200], row 1 gets [1011, 2022], row 2 nothing; a second backward adds.
  const auto embedding = make_embedding("emb", 3, 2);
  const LayerParams params{Tensor({3, 2})};
  LayerCache cache;
  embedding->forward(params, tensor_of({2, 2}, {1, 1, 0, 1}), cache);
  LayerGrads grads = zero_layer_grads(*embedding, params);
  const Tensor dy = tensor_of({2, 2, 2}, {1, 2, 10, 20, 100, 200, 1000, 2000});
  const Tensor dx = embedding->backward(params, dy, cache, grads);
  EXPECT_EQ(dx.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(dx.data, (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(grads[0].dense.data, (std::vector<float>{100, 200, 1011, 2022, 0, 0}));
  embedding->backward(params, dy, cache, grads);
  EXPECT_EQ(grads[0].dense.data, (std::vector<float>{200, 400, 2022, 4044, 0, 0}));
}

TEST(Embedding, RejectsIdsOutsideTheVocabularyNamingTheLayer) {
  const auto embedding = make_embedding("gpt.layers[0]", 3, 2);
  const LayerParams params{Tensor({3, 2})};
  for (float bad : {3.0f, -1.0f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    LayerCache cache;
    try {
      embedding->forward(params, tensor_of({1, 2}, {0, bad}), cache);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "gpt.layers[0]: input[0][1]");
      EXPECT_NE(std::string(e.what()).find("[0, 3)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_embedding("emb", 0, 2), InternalError);
}

TEST(Embedding, InitialisesTheTableFromAStandardNormal) {
  const auto embedding = make_embedding("emb", 500, 9);  // 4500 values, an odd count
  std::mt19937_64 rng(31), again(31);
  LayerParams params, same;
  embedding->init_params(params, rng);
  embedding->init_params(same, again);
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{500, 9}));
  EXPECT_EQ(params[0].data, same[0].data);
  double sum = 0.0, squares = 0.0;
  for (float v : params[0].data) {
    EXPECT_TRUE(std::isfinite(v));
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(params[0].size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.06);  // 4 standard errors of 1/√4500
  EXPECT_NEAR(squares / n - mean * mean, 1.0, 0.1);
}

TEST(Embedding, TableGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(33);
  const auto embedding = make_embedding("emb", 5, 4);
  LayerParams params;
  embedding->init_params(params, rng);
  const Tensor ids = tensor_of({2, 3}, {4, 1, 4, 0, 2, 4});
  expect_layer_gradients(*embedding, params, ids, 34, 1e-3, false);
}

TEST(PositionalEncoding, AddsSinesAndCosines) {
  // d = 4: PE(t) = [sin t, cos t, sin(t/100), cos(t/100)] (10000^(2/4) = 100).
  // t = 0: [0, 1, 0, 1]; t = 1: [0.8414710, 0.5403023, 0.0099998, 0.9999500].
  const auto pe = make_positional_encoding(2, 4);
  EXPECT_TRUE(pe->param_shapes().empty());
  LayerCache cache;
  const Tensor zeros({1, 2, 4});
  expect_values_near(pe->forward({}, zeros, cache), {0, 1, 0, 1, 0.8414710f, 0.5403023f, 0.0099998f, 0.9999500f},
                     1e-6);
  const Tensor x = tensor_of({2, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, -1, 0, 0, 0, 0});
  const Tensor y = pe->forward({}, x, cache);
  EXPECT_EQ(y.shape, x.shape);
  expect_values_near(y, {1, 3, 3, 5, 5.8414710f, 6.5403023f, 7.0099998f, 8.99995f, -1, 0, -1, 0, 0.8414710f,
                         0.5403023f, 0.0099998f, 0.9999500f},
                     1e-5);
}

TEST(PositionalEncoding, OddWidthEndsWithASine) {
  // d = 3: PE(1, 2) = sin(1/10000^(2/3)) = sin(1/464.15888) = 0.0021544.
  LayerCache cache;
  const Tensor y = make_positional_encoding(2, 3)->forward({}, Tensor({1, 2, 3}), cache);
  expect_values_near(y, {0, 1, 0, 0.8414710f, 0.5403023f, 0.0021544f}, 1e-6);
}

TEST(PositionalEncoding, PassesTheGradientThrough) {
  std::mt19937_64 rng(35);
  const auto pe = make_positional_encoding(3, 4);
  LayerCache cache;
  pe->forward({}, random_tensor({2, 3, 4}, rng), cache);
  const Tensor dy = random_tensor({2, 3, 4}, rng);
  LayerGrads none;
  const Tensor dx = pe->backward({}, dy, cache, none);
  EXPECT_EQ(dx.shape, dy.shape);
  EXPECT_EQ(dx.data, dy.data);
  EXPECT_THROW(pe->forward({}, Tensor({2, 4, 3}), cache), InternalError);
  EXPECT_THROW(make_positional_encoding(0, 4), InternalError);
}

}  // namespace
}  // namespace trainsim
