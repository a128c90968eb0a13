// A boundary passed between two networks on one GPU (RangeNetwork::
// export_cut, and a range's input exported so): its values are those the
// host path packs, and the ranges after it compute what they compute from
// the host's copy, forward and backward, across a cut of two tensors.
// A worker's network computes no gradient of the model's input. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_device_store.hpp"
#include "exec/cuda/cuda_network.hpp"
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

}  // namespace
}  // namespace trainsim
