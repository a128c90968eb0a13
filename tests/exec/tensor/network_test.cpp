// The network a model builds: which zoo models run, the errors for those that
// cannot, seeded weights, ranges of layers, and a whole-model gradient check.
#include <gtest/gtest.h>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"
#include "tests/exec/tensor/build_error.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::directional_difference;
using testing_fixtures::expect_close;
using testing_fixtures::grad_dot;
using testing_fixtures::random_tensor;

Tensor batch_of(const Network& network, int64_t batch, std::mt19937_64& rng) {
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), network.input_shape.begin(), network.input_shape.end());
  return random_tensor(shape, rng, 0.0f, 1.0f);  // image-like pixels in [0, 1)
}

using testing_fixtures::build_error;

TEST(BuildNetwork, BuildsTheZooChainModelsWithOneKernelPerLayer) {
  for (const char* name : {"fmnist-mlp", "mnist-mlp", "fmnist-cnn", "cifar100-cnn", "text-bag"}) {
    const Model model = build_zoo_model(name);
    const Network network = build_network(model);
    EXPECT_EQ(network.model, name);
    ASSERT_EQ(network.layers.size(), model.layers.size()) << name;
    EXPECT_EQ(network.layer_names.front(), model.layers.front().name);
    EXPECT_EQ(network.input_shape, model.input_shape);
    // Parameter counts agree with the zoo's hand counts.
    const Weights weights = init_weights(network, 1);
    int64_t params = 0;
    for (const auto& layer : weights) {
      for (const auto& tensor : layer) params += tensor.size();
    }
    EXPECT_EQ(params, param_count(model)) << name;
  }
  EXPECT_EQ(build_network(build_zoo_model("fmnist-cnn")).classes, 10);
  EXPECT_EQ(build_network(build_zoo_model("cifar100-cnn")).classes, 100);
}

TEST(BuildNetwork, RejectsAnOpWithoutKernelNamingIt) {
  ModelBuilder b("tanh-mlp", "test", {4}, 1);
  b.activation("act", "tanh", b.linear("fc", kModelInput, 3));  // tanh: no kernel yet
  const InputError e = build_error(std::move(b).build());
  EXPECT_EQ(e.where(), "tanh-mlp: layers[1] 'act'");
  EXPECT_EQ(e.problem(), "op 'tanh' has no CPU kernel");
}

TEST(BuildNetwork, RejectsADeclaredShapeItsKernelDoesNotProduce) {
  Model model = build_zoo_model("fmnist-mlp");
  model.layers[2].output_shape = {255};  // relu1 reads fc1's {256} and computes {256}
  const InputError e = build_error(model);
  EXPECT_EQ(e.where(), "fmnist-mlp: layers[2] 'relu1'");
  EXPECT_NE(e.problem().find("computes {256}"), std::string::npos) << e.what();
}

TEST(BuildNetwork, RejectsAParameterCountItsKernelDoesNotHave) {
  // fc1 declared 784 -> 255 would hold 784·255 + 255 = 200,175 parameters, not
  // the 200,960 its param_count says (784·256 + 256).
  Model model = build_zoo_model("fmnist-mlp");
  model.layers[1].output_shape = {255};
  const InputError e = build_error(model);
  EXPECT_EQ(e.where(), "fmnist-mlp: layers[1] 'fc1'");
  EXPECT_EQ(e.problem(), "declares 200960 parameters but its kernel holds 200175");
}

// embedding_bag -> linear, written out by hand: {T = 4} ids -> {3} -> {2}.
Model text_model() {
  Model model;
  model.name = "bag";
  model.input_shape = {4};
  Layer bag{"embed", "embedding_bag", {kModelInput}, {3}};
  bag.sparse = true;
  bag.sparse_rows = 7;
  bag.param_count = 7 * 3;
  Layer fc{"fc", "linear", {"embed"}, {2}};
  fc.param_count = 3 * 2 + 2;
  model.layers = {bag, fc};
  return model;
}

TEST(ZeroGradients, IsDenseAndZeroForDenseLayersAndEmptySparseForTables) {
  const Network network = build_network(text_model());
  const Weights weights = init_weights(network, 5);
  const Gradients grads = zero_gradients(network, weights);
  ASSERT_EQ(grads.size(), 2u);
  ASSERT_EQ(grads[0].size(), 1u);
  EXPECT_TRUE(grads[0][0].sparse);
  EXPECT_TRUE(grads[0][0].rows.empty());
  EXPECT_EQ(grads[0][0].row_values.shape, (std::vector<int64_t>{0, 3}));
  ASSERT_EQ(grads[1].size(), 2u);
  EXPECT_FALSE(grads[1][0].sparse);
  EXPECT_EQ(grads[1][0].dense.shape, (std::vector<int64_t>{2, 3}));
  for (float v : grads[1][0].dense.data) EXPECT_EQ(v, 0.0f);
}

TEST(InitWeights, SameSeedGivesTheSameBitsOtherSeedsOthers) {
  const Network network = build_network(build_zoo_model("fmnist-cnn"));
  const Weights a = init_weights(network, 42), b = init_weights(network, 42), c = init_weights(network, 43);
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t k = 0; k < a[i].size(); ++k) {
      EXPECT_EQ(a[i][k].data, b[i][k].data);
      EXPECT_NE(a[i][k].data, c[i][k].data);
    }
  }
}

TEST(InitWeights, ALayersWeightsDoNotDependOnTheOtherLayers) {
  // fc1 with and without bias draws 32 values more or fewer; fc2 is unchanged.
  const auto mlp = [](bool fc1_bias) {
    ModelBuilder b("mlp", "test", {6}, 1);
    b.linear("fc2", b.relu("relu", b.linear("fc1", kModelInput, 32, fc1_bias)), 10);
    return build_network(std::move(b).build());
  };
  const Weights with_bias = init_weights(mlp(true), 9), without_bias = init_weights(mlp(false), 9);
  EXPECT_EQ(with_bias[0][0].data, without_bias[0][0].data);
  EXPECT_EQ(with_bias[2][0].data, without_bias[2][0].data);
  EXPECT_EQ(with_bias[2][1].data, without_bias[2][1].data);
}

TEST(ForwardRange, TwoRangesEqualTheWholeForwardAndBackward) {
  // fmnist-cnn split after layer k = 4 (pool1): stage 0 runs [0, 4], stage 1 [5, last].
  const Network network = build_network(build_zoo_model("fmnist-cnn"));
  const Weights weights = init_weights(network, 3);
  std::mt19937_64 rng(4);
  const Tensor x = batch_of(network, 3, rng);
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1, k = 4;
  std::vector<LayerCache> whole, front, back;
  const Tensor y = forward_range(network, weights, 0, last, x, whole);
  const Tensor y_split = forward_range(network, weights, k + 1, last, forward_range(network, weights, 0, k, x, front),
                                       back);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(y.data, y_split.data);
  EXPECT_EQ(whole.size(), static_cast<size_t>(last + 1));
  EXPECT_EQ(front.size(), static_cast<size_t>(k + 1));

  const Tensor dy = random_tensor(y.shape, rng);
  Gradients g_whole = zero_gradients(network, weights), g_split = zero_gradients(network, weights);
  const Tensor dx = backward_range(network, weights, 0, last, dy, whole, g_whole);
  const Tensor dx_split =
      backward_range(network, weights, 0, k, backward_range(network, weights, k + 1, last, dy, back, g_split), front,
                     g_split);
  EXPECT_EQ(dx.data, dx_split.data);
  for (size_t i = 0; i < g_whole.size(); ++i) {
    for (size_t p = 0; p < g_whole[i].size(); ++p) EXPECT_EQ(g_whole[i][p].dense.data, g_split[i][p].dense.data);
  }
}

// Mean of the analytic ∇L·V at the midpoints of `pieces` equal parts of the
// segment w ± εV (w = weights[i][p]). ReLU and max-pool kinks cross that
// segment in a whole CNN (tens of thousands of units), so a central difference
// no longer equals the gradient at one point; it still equals the integral of
// the gradient along the segment, which this midpoint rule approximates.
double path_mean_derivative(const Network& network, Weights& weights, size_t i, size_t p, const Tensor& v,
                            double eps, int pieces, const Tensor& x, std::span<const int32_t> labels) {
  const Tensor saved = weights[i][p];
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  double sum = 0.0;
  for (int k = 0; k < pieces; ++k) {
    const double t = -eps + (2.0 * k + 1.0) * eps / pieces;
    for (int64_t j = 0; j < saved.size(); ++j) weights[i][p].data[j] = saved.data[j] + static_cast<float>(t) * v.data[j];
    std::vector<LayerCache> caches;
    Tensor dlogits;
    softmax_cross_entropy(forward_range(network, weights, 0, last, x, caches), labels, &dlogits);
    Gradients grads = zero_gradients(network, weights);
    backward_range(network, weights, 0, last, dlogits, caches, grads);
    sum += grad_dot(grads[i][p], v);
  }
  weights[i][p] = saved;
  return sum / pieces;
}

TEST(NetworkGradient, FmnistCnnMatchesFiniteDifferencesOfTheLoss) {
  // L = mean cross-entropy of the whole network on a batch of 2; each
  // parameter tensor's gradient, averaged along w ± εV, against the loss's
  // central difference over the same segment.
  const Network network = build_network(build_zoo_model("fmnist-cnn"));
  Weights weights = init_weights(network, 7);
  std::mt19937_64 rng(8);
  const Tensor x = batch_of(network, 2, rng);
  const std::vector<int32_t> labels{3, 8};
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  const auto loss = [&] {
    std::vector<LayerCache> scratch;
    return softmax_cross_entropy(forward_range(network, weights, 0, last, x, scratch), labels, nullptr);
  };
  constexpr double kEps = 3e-3;  // a 0.3% step: few kinks crossed, far above float rounding
  int checked = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    for (size_t p = 0; p < weights[i].size(); ++p, ++checked) {
      // V scaled to the tensor's largest value, so ε is a relative step.
      Tensor v = random_tensor(weights[i][p].shape, rng);
      const float scale = weights[i][p].matrix().cwiseAbs().maxCoeff();
      for (float& value : v.data) value *= scale;
      const double analytic = path_mean_derivative(network, weights, i, p, v, kEps, 16, x, labels);
      const double numeric = directional_difference(loss, weights[i][p], v, kEps);
      expect_close(analytic, numeric,
                   network.layer_names[i] + " parameter " + std::to_string(p));
    }
  }
  EXPECT_EQ(checked, 8);  // conv1, conv2, fc1, fc2: weight and bias each
}

TEST(NetworkGradient, SparseModelTableGradientMatchesFiniteDifferences) {
  const Network network = build_network(text_model());
  Weights weights = init_weights(network, 11);
  Tensor x({2, 4});
  x.data = {0, 6, 6, -1, 2, -1, -1, 5};
  const std::vector<int32_t> labels{1, 0};
  std::vector<LayerCache> caches;
  Tensor dlogits;
  softmax_cross_entropy(forward_range(network, weights, 0, 1, x, caches), labels, &dlogits);
  Gradients grads = zero_gradients(network, weights);
  backward_range(network, weights, 0, 1, dlogits, caches, grads);
  EXPECT_EQ(grads[0][0].rows, (std::vector<int64_t>{0, 6, 6, 2, 5}));
  const auto loss = [&] {
    std::vector<LayerCache> scratch;
    return softmax_cross_entropy(forward_range(network, weights, 0, 1, x, scratch), labels, nullptr);
  };
  std::mt19937_64 rng(12);
  const Tensor v = random_tensor(weights[0][0].shape, rng);
  expect_close(grad_dot(grads[0][0], v), directional_difference(loss, weights[0][0], v, 1e-2), "table");
}

}  // namespace
}  // namespace trainsim
