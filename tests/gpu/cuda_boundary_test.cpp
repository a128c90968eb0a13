// A boundary passed between two networks on one GPU (RangeNetwork::
// export_cut, and a range's input exported so): its values are those the
// host path packs, and the ranges after it compute what they compute from
// the host's copy, forward and backward, across a cut of two tensors.
// A worker's network computes no gradient of the model's input, and holds
// its stage's layers alone. Skipped without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_device_store.hpp"
#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/held_layers.hpp"
#include "model/error.hpp"
#include "tests/exec/strategy_runs.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

// Cut `i` of `from` exported into an array of `store`, as a tensor of its rows.
Tensor exported_cut(CudaNetwork& from, const Network& net, int64_t i, bool gradient,
                    const std::shared_ptr<DeviceStore>& store) {
  Tensor t;
  t.shape = {from.batch()};
  const std::vector<int64_t>& sample = net.cut_shapes[static_cast<size_t>(i)];
  t.shape.insert(t.shape.end(), sample.begin(), sample.end());
  t.exported = std::make_shared<ExportedBoundary>(
      ExportedBoundary{store, from.export_cut(net, i, gradient, *store), /*memory=*/0});
  return t;
}

TEST(CudaBoundary, AnExportedCutIsTheHostsPackedAndFeedsTheRangesAfterIt) {
  SKIP_WITHOUT_GPU();
  const Model model = strategy_runs::residual_mlp();
  const Network net = build_network(model);
  const Weights w = init_weights(net, strategy_runs::kWeightSeed);
  const int64_t batch = 8, cut = 4, last = static_cast<int64_t>(net.layers.size()) - 1;
  ASSERT_EQ(net.cuts[static_cast<size_t>(cut)].size(), 2u);  // fc1's output (for res) and act's
  Tensor x;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, batch, x, labels);
  CudaNetworkOptions options;
  options.precision = CudaPrecision::exact;
  options.input_gradient = true;
  // a and b: the first and second stage passing device to device; c and d:
  // the same stages through the host.
  CudaNetwork a(model, w, batch, 0, options), b(model, w, batch, 0, options), c(model, w, batch, 0, options),
      d(model, w, batch, 0, options);
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);

  a.forward_range(net, 0, cut - 1, &x);
  c.forward_range(net, 0, cut - 1, &x);
  const Tensor values = exported_cut(a, net, cut, false, store);
  const Tensor values_by_host = packed_boundary(c.cut_values(net, cut));
  Tensor back = values;
  exported_to_host(back);
  EXPECT_EQ(back.exported, nullptr);
  EXPECT_EQ(back.data, values_by_host.data);

  const double loss = b.forward_range_loss(net, cut, last, &values, labels, 1.0f).read();
  EXPECT_EQ(loss, d.forward_range_loss(net, cut, last, &values_by_host, labels, 1.0f).read());
  Gradients gb = zero_gradients(net, w), gd = zero_gradients(net, w);
  b.backward_range(net, cut, last, nullptr, gb);
  d.backward_range(net, cut, last, nullptr, gd);
  const Tensor grads = exported_cut(b, net, cut, true, store);
  const Tensor grads_by_host = packed_boundary(d.cut_gradients(net, cut));
  back = grads;
  exported_to_host(back);
  EXPECT_EQ(back.data, grads_by_host.data);

  Gradients ga = zero_gradients(net, w), gc = zero_gradients(net, w);
  a.backward_range(net, 0, cut - 1, &grads, ga);
  c.backward_range(net, 0, cut - 1, &grads_by_host, gc);
  for (int64_t l = 0; l < cut; ++l) {
    for (size_t p = 0; p < ga[static_cast<size_t>(l)].size(); ++p) {
      EXPECT_EQ(ga[static_cast<size_t>(l)][p].dense.data, gc[static_cast<size_t>(l)][p].dense.data) << "layer " << l;
    }
  }
}

// A network as a worker's device makes it (every tensor's gradient a stage
// may send back) computes none of the model's input, which no stage sends:
// fmnist-cnn's first convolution computes its weights' gradients alone, as
// the profile times it; each layer alone against the CPU still has it.
TEST(CudaBoundary, AWorkersNetworkComputesNoGradientOfTheModelsInput) {
  SKIP_WITHOUT_GPU();
  const Model model = build_zoo_model("fmnist-cnn");
  const Network net = build_network(model);
  const Weights w = init_weights(net, strategy_runs::kWeightSeed);
  Tensor x;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, 8, x, labels);
  CudaNetworkOptions worker;
  worker.input_gradient = true;
  worker.model_input_gradient = false;
  CudaNetworkOptions every = worker;
  every.model_input_gradient = true;
  for (const auto& [options, model_input] : {std::pair{worker, false}, std::pair{every, true}}) {
    CudaNetwork gpu(model, w, 8, 0, options);
    gpu.set_batch(x, labels);
    gpu.forward_and_loss();
    gpu.backward();
    EXPECT_EQ(gpu.has_input_gradient(0), model_input);
    EXPECT_TRUE(gpu.has_input_gradient(1));  // the first convolution's output, a cut a stage may start at
  }
}

// A worker's network holding its stage alone (CudaNetworkOptions::held)
// computes what a network of the whole model computes over that stage,
// bit for bit, for three stages of residual-mlp: the middle one [3, 4]
// (act, fc2) carries fc1's output to res without reading it. Each refuses
// a range of another stage and a whole pass.
TEST(CudaBoundary, AStageHoldingItsLayersAloneComputesAsTheWholeModelsNetwork) {
  SKIP_WITHOUT_GPU();
  const Model model = strategy_runs::residual_mlp();
  const Network net = build_network(model);
  const Weights w = init_weights(net, strategy_runs::kWeightSeed);
  const int64_t batch = 8, last = static_cast<int64_t>(net.layers.size()) - 1;
  const std::vector<LayerRange> stages = {{0, 2}, {3, 4}, {5, last}};
  ASSERT_EQ(net.cuts[5], (std::vector<int32_t>{1, 4}));  // fc1's output crosses the middle stage
  Tensor x;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, batch, x, labels);
  CudaNetworkOptions whole;
  whole.precision = CudaPrecision::exact;
  whole.input_gradient = true;
  whole.model_input_gradient = false;
  whole.steps = false;
  std::vector<std::unique_ptr<CudaNetwork>> held_nets, whole_nets;
  for (const LayerRange& stage : stages) {
    CudaNetworkOptions own = whole;
    own.held = std::make_shared<const HeldLayers>(held_layers(net, std::vector<LayerRange>{stage}));
    held_nets.push_back(std::make_unique<CudaNetwork>(model, w, batch, 0, own));
    whole_nets.push_back(std::make_unique<CudaNetwork>(model, w, batch, 0, whole));
  }
  for (const auto* nets : {&held_nets, &whole_nets}) {
    for (size_t k = 0; k < stages.size(); ++k) (*nets)[k]->load_weights(w, stages[k].first, stages[k].last);
  }
  // Forward stage by stage through the host, the loss, backward likewise.
  double losses[2] = {0, 0};
  std::vector<Tensor> inputs[2], input_gradients[2];
  Gradients grads[2] = {zero_gradients(net, w), zero_gradients(net, w)};
  for (int n = 0; n < 2; ++n) {
    std::vector<std::unique_ptr<CudaNetwork>>& nets = n == 0 ? held_nets : whole_nets;
    Tensor in = x;
    for (size_t k = 0; k + 1 < stages.size(); ++k) {
      nets[k]->forward_range(net, stages[k].first, stages[k].last, &in);
      in = nets[k]->cut_values(net, stages[k].last + 1);
      inputs[n].push_back(packed_boundary(in));
    }
    losses[n] = nets.back()->forward_range_loss(net, stages.back().first, last, &in, labels, 1.0f).read();
    const Tensor* dy = nullptr;
    Tensor g;
    for (size_t k = stages.size(); k-- > 0;) {
      nets[k]->backward_range(net, stages[k].first, stages[k].last, dy, grads[n]);
      if (k == 0) break;
      g = nets[k]->cut_gradients(net, stages[k].first);
      input_gradients[n].push_back(packed_boundary(g));
      dy = &g;
    }
  }
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_EQ(inputs[0].size(), inputs[1].size());
  for (size_t k = 0; k < inputs[0].size(); ++k) EXPECT_EQ(inputs[0][k].data, inputs[1][k].data) << "cut " << k;
  for (size_t k = 0; k < input_gradients[0].size(); ++k) {
    EXPECT_EQ(input_gradients[0][k].data, input_gradients[1][k].data) << "gradient of cut " << k;
  }
  for (size_t l = 0; l < grads[0].size(); ++l) {
    for (size_t p = 0; p < grads[0][l].size(); ++p) {
      EXPECT_EQ(grads[0][l][p].dense.data, grads[1][l][p].dense.data) << "layer " << l;
    }
  }
  EXPECT_THROW(held_nets[1]->forward_range(net, 0, 2, &x), InternalError);
  EXPECT_THROW(held_nets[1]->load_weights(w, 0, 2), InternalError);
  EXPECT_THROW(held_nets[1]->cut_values(net, 0), InternalError);
  EXPECT_THROW(held_nets[1]->forward_and_loss(), InternalError);
  EXPECT_THROW(whole_nets[0]->update(SgdOptions{}), InternalError);  // built without velocities
}

// A network made under a worker's budget charges every array it makes,
// gives them back when it goes, and one a byte past the budget is refused
// with nothing left charged; a stage holding its layers alone charges less
// than the whole model's network.
TEST(CudaBoundary, AStagesNetworkChargesItsArraysToTheWorkersBudget) {
  SKIP_WITHOUT_GPU();
  const Model model = strategy_runs::residual_mlp();
  const Network net = build_network(model);
  const Weights w = init_weights(net, strategy_runs::kWeightSeed);
  CudaNetworkOptions options;
  options.input_gradient = true;
  options.steps = false;
  const auto charged = [&](const CudaNetworkOptions& o) {
    {
      const CudaNetwork made(model, w, 8, 0, o);
      const int64_t held = o.budget->held();
      EXPECT_GT(held, 0);
      EXPECT_EQ(o.budget->peak(), held);
    }
    EXPECT_EQ(o.budget->held(), 0);
    return o.budget->peak();
  };
  options.budget = std::make_shared<MemoryBudget>("whole", -1);
  const int64_t whole = charged(options);
  CudaNetworkOptions stage = options;
  stage.held = std::make_shared<const HeldLayers>(held_layers(net, std::vector<LayerRange>{{3, 4}}));
  stage.budget = std::make_shared<MemoryBudget>("stage", -1);
  EXPECT_LT(charged(stage), whole);
  options.budget = std::make_shared<MemoryBudget>("worker 0, one of 4 sharing cuda:0", whole - 1);
  EXPECT_THROW(CudaNetwork(model, w, 8, 0, options), MemoryBudgetExceeded);
  EXPECT_EQ(options.budget->held(), 0);
}

}  // namespace
}  // namespace trainsim
