// The lending device keeping a worker's parameter-gradient sums where its
// networks compute (ParamGrad::kept, a GradientStore), over the CPU
// stand-in of tests/exec/buffered_cpu_network.hpp: micro-batches and ranges
// add into one sum per gradient, which comes back to the host once, where
// an op first reads it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using buffered::MlpCalls;
using buffered::ops_of;
using strategy_runs::RunSpec;

// Where the gradients come back: once per iteration and worker where only
// the update reads them, however many micro-batches or ranges add into
// them; once per AllReduce bucket in data parallelism.
TEST(LendingDeviceCalls, GradientsComeBackWhereTheHostFirstReadsThem) {
  const auto by_name = [](const std::string& name) {
    for (const strategy_runs::StrategyCase& c : strategy_runs::cases()) {
      if (c.name == name) return c.spec;
    }
    throw std::logic_error("no case " + name);
  };
  for (const std::string name : {"single", "gpipe", "one_f_one_b", "dp_ring", "dp_overlap"}) {
    SCOPED_TRACE(name);
    const RunSpec spec = by_name(name);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(spec, &t);
    const Plan plan = strategy_runs::run(spec).plan;
    const bool reduces = ops_of(plan, OpKind::kAllReduce) > 0;
    EXPECT_EQ(t.waits, reduces ? ops_of(plan, OpKind::kAllReduce) : ops_of(plan, OpKind::kUpdate));
    if (name == "gpipe" || name == "one_f_one_b") {
      EXPECT_LT(t.waits, t.backwards);
    }
  }
}

// By hand: two micro-batches' backwards add into one sum kept on the
// device; the host refuses the set until it is brought back, on one wait,
// bit for bit the CPU's sum.
TEST(LendingDeviceCalls, MicroBatchesSumOnTheDeviceAndComeBackOnce) {
  BufferCounts counts;
  Network network = build_network(build_zoo_model("fmnist-mlp"));
  Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  std::unique_ptr<Device> device = make_lending_device(
      [&](const Network& n, int64_t batch) { return std::make_unique<BufferedCpuNetwork>(n, batch, counts); },
      std::make_shared<CountingStore>(counts));
  Gradients reference = zero_gradients(network, weights);
  Gradients grads = zero_gradients(network, weights);
  for (int32_t mb = 0; mb < 2; ++mb) {
    Tensor x;
    std::vector<int32_t> labels;
    strategy_runs::synthetic_batch(mb, 8, x, labels);
    std::vector<LayerCache> cpu_caches, caches;
    Tensor logits = forward_range(network, weights, 0, 6, x, cpu_caches);
    Tensor dlogits;
    softmax_cross_entropy(logits, labels, &dlogits);
    backward_range(network, weights, 0, 6, std::move(dlogits), cpu_caches, reference);
    Tensor kept_dlogits;
    device->forward_loss(network, weights, 1, PassId{0, mb}, 0, 6, x, caches, labels, 1.0f, kept_dlogits);
    device->backward(network, weights, 1, PassId{0, mb}, 0, 6, std::move(kept_dlogits), caches, grads);
  }
  EXPECT_EQ(counts.waits, 0);
  ASSERT_NE(grads[1][0].kept, nullptr);  // fc1's weight
  EXPECT_THROW(flatten_gradients(grads, 0, 6), std::logic_error);
  const Gradients copy = grads;  // shares the kept sums
  device->gradients_to_host(grads, 0, 6);
  EXPECT_EQ(counts.waits, 1);
  EXPECT_EQ(counts.sums_back, counts.sums);
  EXPECT_EQ(flatten_gradients(grads, 0, 6), flatten_gradients(reference, 0, 6));
  Gradients again = copy;  // its sums were taken
  EXPECT_THROW(device->gradients_to_host(again, 0, 6), std::logic_error);
  device->gradients_to_host(grads, 0, 6);  // nothing kept: no wait
  EXPECT_EQ(counts.waits, 1);
  clear_gradients(again, 0, 6);  // a kept sum let go reads as zero
  EXPECT_EQ(again[1][0].kept, nullptr);
  for (const float v : flatten_gradients(again, 0, 6)) ASSERT_EQ(v, 0.0f);
}

// Without a store the gradients are added on the host by each backward.
TEST(LendingDeviceCalls, WithoutAStoreBackwardsAddIntoTheHostsGradients) {
  MlpCalls m;
  std::vector<LayerCache> caches;
  Tensor dlogits;
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 0}, 0, 6, m.x, caches, m.labels, 1.0f, dlogits);
  Gradients grads = zero_gradients(m.network, m.weights);
  m.device->backward(m.network, m.weights, 1, PassId{0, 0}, 0, 6, std::move(dlogits), caches, grads);
  EXPECT_EQ(grads[1][0].kept, nullptr);
  EXPECT_EQ(m.counts.sums, 0);
  float largest = 0;
  for (const float v : flatten_gradients(grads, 0, 6)) largest = std::max(largest, std::abs(v));
  EXPECT_GT(largest, 0.0f);
}

}  // namespace
}  // namespace trainsim
