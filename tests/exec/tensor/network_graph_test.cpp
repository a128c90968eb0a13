// Networks over a layer graph: residual joins (add) and concats, the cuts a
// boundary carries (in parts, or packed for a transport), stages that equal
// the whole network, and
// the whole graph's gradient against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "exec/data/batching.hpp"
#include "exec/tensor/held_layers.hpp"
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

// input {6} -> fc1 (0) -> ln (1) -> act (2) -> fc2 (3); res (4) = fc2 + fc1;
// cat (5) = [res, act]; bn (6); out (7) {3}.
Model graph_model() {
  ModelBuilder b("graph", "test", {6}, 4);
  const std::string fc1 = b.linear("fc1", kModelInput, 8);
  const std::string act = b.activation("act", "gelu", b.layernorm("ln", fc1));
  const std::string res = b.add("res", {b.linear("fc2", act, 8), fc1});
  b.linear("out", b.batchnorm("bn", b.concat("cat", {res, act})), 3);
  return std::move(b).build();
}

TEST(NetworkGraph, CutsHoldWhatCrossesEachBoundary) {
  const Network network = build_network(graph_model());
  EXPECT_EQ(network.inputs[4], (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(network.inputs[5], (std::vector<int32_t>{4, 2}));
  // fc1 lives until res reads it (layer 4), act until cat (layer 5).
  const std::vector<std::vector<int32_t>> cuts = {{-1}, {0}, {0, 1}, {0, 2}, {0, 2, 3}, {2, 4}, {5}, {6}, {7}};
  EXPECT_EQ(network.cuts, cuts);
  const std::vector<std::vector<int64_t>> shapes = {{6}, {8}, {16}, {16}, {24}, {16}, {16}, {16}, {3}};
  EXPECT_EQ(network.cut_shapes, shapes);
  EXPECT_EQ(network.classes, 3);
}

// What a worker running layers [2, 3] (act, fc2) holds: those layers, the
// tensors they read and write, and those its boundaries carry: fc1 (0)
// crosses the stage to res without either layer reading it. With a second
// range [5, 6], the cuts around it too; with none, everything.
TEST(NetworkGraph, AStageHoldsItsLayersAndWhatItsBoundariesCarry) {
  const Network network = build_network(graph_model());
  const std::vector<LayerRange> stage = {{2, 3}};
  const HeldLayers held = held_layers(network, stage);
  EXPECT_EQ(held.computes, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(held.tensors, (std::vector<uint8_t>{0, 1, 1, 1, 1, 0, 0, 0, 0}));  // input, 0..7
  EXPECT_EQ(held.cuts, (std::vector<uint8_t>{0, 0, 1, 0, 1, 0, 0, 0, 0}));
  EXPECT_FALSE(held.every_layer());
  const std::vector<LayerRange> two = {{5, 6}, {2, 3}, {2, 3}};
  const HeldLayers both = held_layers(network, two);
  EXPECT_EQ(both.computes, (std::vector<uint8_t>{0, 0, 1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(both.tensors, (std::vector<uint8_t>{0, 1, 1, 1, 1, 1, 1, 1, 0}));  // cat reads res (4) and act (2)
  EXPECT_EQ(both.cuts, (std::vector<uint8_t>{0, 0, 1, 0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(distinct_ranges(two, 8), (std::vector<LayerRange>{{2, 3}, {5, 6}}));
  const HeldLayers whole = held_layers(network, {});
  EXPECT_TRUE(whole.every_layer());
  EXPECT_EQ(whole.tensors, std::vector<uint8_t>(9, 1));
  EXPECT_EQ(whole.cuts, std::vector<uint8_t>(9, 1));
  const std::vector<LayerRange> outside = {{6, 8}};
  EXPECT_THROW(held_layers(network, outside), InternalError);
}

TEST(NetworkGraph, EveryTwoStageSplitEqualsTheWholeForwardAndBackward) {
  const Network network = build_network(graph_model());
  const Weights weights = init_weights(network, 3);
  std::mt19937_64 rng(4);
  const Tensor x = random_tensor({5, 6}, rng);
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  std::vector<LayerCache> whole;
  const Tensor y = forward_range(network, weights, 0, last, x, whole);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{5, 3}));
  const Tensor dy = random_tensor(y.shape, rng);
  Gradients g_whole = zero_gradients(network, weights);
  const Tensor dx = backward_range(network, weights, 0, last, dy, whole, g_whole);
  for (int64_t k = 0; k < last; ++k) {  // stage 0 runs [0, k], stage 1 [k + 1, last]
    std::vector<LayerCache> front, back;
    const Tensor boundary = forward_range(network, weights, 0, k, x, front);
    std::vector<int64_t> packed{5};
    packed.insert(packed.end(), network.cut_shapes[k + 1].begin(), network.cut_shapes[k + 1].end());
    EXPECT_EQ(boundary.shape, packed) << "cut " << k + 1;
    EXPECT_EQ(forward_range(network, weights, k + 1, last, boundary, back).data, y.data) << "cut " << k + 1;
    Gradients g_split = zero_gradients(network, weights);
    const Tensor d_boundary = backward_range(network, weights, k + 1, last, dy, back, g_split);
    EXPECT_EQ(d_boundary.shape, boundary.shape);
    EXPECT_EQ(backward_range(network, weights, 0, k, d_boundary, front, g_split).data, dx.data) << "cut " << k + 1;
    for (size_t i = 0; i < g_whole.size(); ++i) {
      for (size_t p = 0; p < g_whole[i].size(); ++p) {
        EXPECT_EQ(g_whole[i][p].dense.data, g_split[i][p].dense.data) << "cut " << k + 1 << ", layer " << i;
      }
    }
  }
}

TEST(NetworkGraph, ABoundaryOfSeveralTensorsTravelsInPartsOrPacked) {
  // Cut 4 carries fc1 (8), act (8) and fc2 (8): three parts, packed as each
  // sample's row [fc1 | act | fc2]. The next range takes either form alike.
  const Network network = build_network(graph_model());
  const Weights weights = init_weights(network, 3);
  std::mt19937_64 rng(5);
  const Tensor x = random_tensor({4, 6}, rng);
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  std::vector<LayerCache> front, back, back_packed;
  const Tensor boundary = forward_range(network, weights, 0, 3, x, front);
  ASSERT_EQ(boundary.parts.size(), 3u);
  EXPECT_TRUE(boundary.data.empty());
  EXPECT_EQ(boundary.shape, (std::vector<int64_t>{4, 24}));
  const Tensor packed = packed_boundary(boundary);
  ASSERT_TRUE(packed.parts.empty());
  ASSERT_EQ(packed.data.size(), 4u * 24u);
  for (int64_t row = 0; row < 4; ++row) {
    for (int64_t part = 0; part < 3; ++part) {
      for (int64_t j = 0; j < 8; ++j) {
        EXPECT_EQ(packed.data[static_cast<size_t>(row * 24 + part * 8 + j)],
                  boundary.parts[static_cast<size_t>(part)].data[static_cast<size_t>(row * 8 + j)]);
      }
    }
  }
  const Tensor y = forward_range(network, weights, 4, last, boundary, back);
  EXPECT_EQ(forward_range(network, weights, 4, last, packed, back_packed).data, y.data);
  // Backward over layer 3 alone (fc2): fc1's and act's gradients pass
  // through it untouched, and given as an rvalue they leave without a copy.
  Tensor dy;
  dy.shape = boundary.shape;
  for (const Tensor& part : boundary.parts) dy.parts.push_back(random_tensor(part.shape, rng));
  const float* fc1_gradient = dy.parts[0].data.data();
  Gradients grads = zero_gradients(network, weights);
  const Tensor d_copied = backward_range(network, weights, 3, 3, dy, {front[3]}, grads);
  const Tensor d_taken = backward_range(network, weights, 3, 3, std::move(dy), {front[3]}, grads);
  ASSERT_EQ(d_taken.parts.size(), 2u);  // cut 3: fc1 and act
  EXPECT_EQ(d_taken.parts[0].data.data(), fc1_gradient);
  EXPECT_EQ(packed_boundary(d_taken).data, packed_boundary(d_copied).data);
}

TEST(NetworkGraph, ARangeReportsEachLayerAsItEndsInOrder) {
  // The profiler's per-layer clock: forward calls back layers first..last,
  // backward last..first, once each, and the results are the same as without.
  const Network network = build_network(graph_model());
  const Weights weights = init_weights(network, 3);
  std::mt19937_64 rng(5);
  const Tensor x = random_tensor({4, 6}, rng);
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  std::vector<int64_t> forward_order, backward_order;
  std::vector<LayerCache> caches, plain_caches;
  const Tensor y = forward_range(network, weights, 1, last, forward_range(network, weights, 0, 0, x, plain_caches),
                                 caches, [&](int64_t l) { forward_order.push_back(l); });
  std::vector<int64_t> expected(static_cast<size_t>(last));
  std::iota(expected.begin(), expected.end(), int64_t{1});
  EXPECT_EQ(forward_order, expected);
  std::vector<LayerCache> again;
  EXPECT_EQ(forward_range(network, weights, 1, last, forward_range(network, weights, 0, 0, x, plain_caches), again).data,
            y.data);
  Gradients grads = zero_gradients(network, weights);
  backward_range(network, weights, 1, last, random_tensor(y.shape, rng), caches, grads,
                 [&](int64_t l) { backward_order.push_back(l); });
  std::reverse(expected.begin(), expected.end());
  EXPECT_EQ(backward_order, expected);
}

TEST(NetworkGraph, EvaluationReadsTheStatisticsTrainingForwardsFoldIn) {
  // graph_model's bn (layer 6) keeps a running mean and variance; the other
  // layers none. Folding in two training forwards moves them; the evaluation
  // forward then gives each sample the output it has alone, where the
  // training forward's output depends on the rest of the batch.
  const Network network = build_network(graph_model());
  const Weights weights = init_weights(network, 3);
  Statistics statistics = init_statistics(network);
  for (size_t l = 0; l < statistics.size(); ++l) EXPECT_EQ(statistics[l].empty(), l != 6) << "layer " << l;
  std::mt19937_64 rng(7);
  const Tensor x = random_tensor({5, 6}, rng);
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  std::vector<LayerCache> caches;
  const Tensor trained = forward_range(network, weights, 0, last, x, caches);
  update_statistics(network, 0, last, caches, statistics);
  update_statistics(network, 0, last, caches, statistics);
  EXPECT_NE(statistics[6][0].data, std::vector<float>(16, 0.0f));
  EXPECT_NE(statistics[6][1].data, std::vector<float>(16, 1.0f));
  const Tensor evaluated = forward_eval(network, weights, statistics, x);
  ASSERT_EQ(evaluated.shape, trained.shape);
  EXPECT_NE(evaluated.data, trained.data);
  for (int64_t row = 0; row < x.rows(); ++row) {
    const Tensor alone = forward_eval(network, weights, statistics, slice_rows(x, {row, 1}));
    for (int64_t c = 0; c < 3; ++c) EXPECT_NEAR(alone.data[c], evaluated.data[row * 3 + c], 1e-5) << "sample " << row;
  }
}

TEST(NetworkGraph, GradientsMatchFiniteDifferencesOfTheLoss) {
  const Network network = build_network(graph_model());
  Weights weights = init_weights(network, 5);
  std::mt19937_64 rng(6);
  Tensor x = random_tensor({4, 6}, rng);
  const std::vector<int32_t> labels{0, 2, 1, 2};
  const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
  const auto loss = [&] {
    std::vector<LayerCache> scratch;
    return softmax_cross_entropy(forward_range(network, weights, 0, last, x, scratch), labels, nullptr);
  };
  std::vector<LayerCache> caches;
  Tensor dlogits;
  softmax_cross_entropy(forward_range(network, weights, 0, last, x, caches), labels, &dlogits);
  Gradients grads = zero_gradients(network, weights);
  const Tensor dx = backward_range(network, weights, 0, last, dlogits, caches, grads);
  constexpr double kEps = 2e-3;  // smooth layers only: no kinks to cross
  int checked = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    for (size_t p = 0; p < weights[i].size(); ++p, ++checked) {
      const Tensor v = random_tensor(weights[i][p].shape, rng);
      expect_close(grad_dot(grads[i][p], v), directional_difference(loss, weights[i][p], v, kEps),
                   network.layer_names[i] + " parameter " + std::to_string(p));
    }
  }
  EXPECT_EQ(checked, 10);  // fc1, fc2, out: weight and bias; ln and bn: scale and shift
  const Tensor v = random_tensor(x.shape, rng);
  expect_close(testing_fixtures::dot(dx, v), directional_difference(loss, x, v, kEps), "the input");
}

TEST(NetworkGraph, ResidualZooModelsBuild) {
  const Model model = build_zoo_model("fmnist-resnet20");
  const Network network = build_network(model);
  const Weights weights = init_weights(network, 1);
  int64_t params = 0;
  for (const auto& layer : weights) {
    for (const auto& tensor : layer) params += tensor.size();
  }
  EXPECT_EQ(params, param_count(model));
  EXPECT_EQ(params, 272'186);
  // Inside a block the branch and its shortcut cross a boundary together.
  size_t widest = 0;
  for (const auto& cut : network.cuts) widest = std::max(widest, cut.size());
  EXPECT_EQ(widest, 2u);
  std::mt19937_64 rng(2);
  std::vector<LayerCache> caches;
  const Tensor y = forward_range(network, weights, 0, static_cast<int64_t>(network.layers.size()) - 1,
                                 random_tensor({2, 1, 28, 28}, rng), caches);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(build_network(build_zoo_model("resnet50")).layers.size(), build_zoo_model("resnet50").layers.size());
}

using testing_fixtures::build_error;

TEST(NetworkGraph, RejectsALayerNothingReadsAndAOneInputOpGivenTwo) {
  ModelBuilder dangling("dangling", "test", {4}, 1);
  const std::string fc = dangling.linear("fc", kModelInput, 4);
  dangling.relu("unused", fc);
  dangling.linear("out", fc, 2);
  InputError e = build_error(std::move(dangling).build());
  EXPECT_EQ(e.where(), "dangling: layers[1] 'unused'");
  EXPECT_EQ(e.problem(), "is read by no later layer");

  // The seeds' residual LSTM looks its words up in a sparse table.
  e = build_error(build_zoo_model("residual-lstm"));
  EXPECT_EQ(e.where(), "residual-lstm: layers[0] 'embedding'");
  EXPECT_EQ(e.problem(), "is an embedding with sparse gradients ({T} -> {T, dim})");

  Model two = graph_model();
  two.layers[1].inputs = {"fc1", "fc1"};  // layernorm of two tensors
  e = build_error(two);
  EXPECT_EQ(e.where(), "graph: layers[1] 'ln'");
  EXPECT_EQ(e.problem(), "reads 2 inputs");
}

TEST(NetworkGraph, AForwardGivenItsInputEqualsOneThatCopiesIt) {
  // Given x as an rvalue, forward_range hands each tensor to the layer that
  // reads it last (forward_consuming) instead of copying it into the cache:
  // the outputs, input gradients and parameter gradients are the same, bit
  // for bit, on a graph, a residual network and a chain.
  std::mt19937_64 rng(9);
  for (const Model& model : {graph_model(), build_zoo_model("fmnist-resnet20"), build_zoo_model("fmnist-mlp")}) {
    SCOPED_TRACE(model.name);
    const Network network = build_network(model);
    const Weights weights = init_weights(network, 5);
    std::vector<int64_t> shape{3};
    shape.insert(shape.end(), network.input_shape.begin(), network.input_shape.end());
    const Tensor x = random_tensor(shape, rng);
    const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
    std::vector<LayerCache> copied, consumed;
    const Tensor y = forward_range(network, weights, 0, last, x, copied);
    Tensor given = x;
    EXPECT_EQ(forward_range(network, weights, 0, last, std::move(given), consumed).data, y.data);
    EXPECT_TRUE(given.data.empty()) << "the input was copied, not taken";
    const Tensor dy = random_tensor(y.shape, rng);
    Gradients g_copied = zero_gradients(network, weights), g_consumed = zero_gradients(network, weights);
    EXPECT_EQ(backward_range(network, weights, 0, last, dy, consumed, g_consumed).data,
              backward_range(network, weights, 0, last, dy, copied, g_copied).data);
    for (size_t l = 0; l < g_copied.size(); ++l) {
      for (size_t p = 0; p < g_copied[l].size(); ++p) EXPECT_EQ(g_consumed[l][p].dense.data, g_copied[l][p].dense.data);
    }
  }
}

}  // namespace
}  // namespace trainsim
