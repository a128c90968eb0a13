// The lending device (exec/tensor/lending_device.hpp), as the GPU device
// runs it, over a CPU network with a GPU network's buffers: its own copy of
// the weights, loaded per layer; per layer the cache of its last forward,
// which the backward reads (a later forward of the layer overwrites it);
// per cut the values and gradients its last ranges left there (those inside
// a range are not kept, so reading one in place fails). It trains every
// strategy bit for bit as the CPU device, reading a pass's boundaries in
// place and bringing to the host only those sent to another worker.
#include "exec/tensor/lending_device.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/error.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

struct BufferCounts {
  std::mutex mu;
  int64_t networks = 0;   // made
  int64_t uploads = 0;    // range inputs given from the host
  int64_t in_place = 0;   // range inputs read where the range before left them
  int64_t downloads = 0;  // cut values or gradients brought back

  void add(int64_t BufferCounts::*field) {
    std::lock_guard lock(mu);
    ++(this->*field);
  }
};

class BufferedCpuNetwork final : public RangeNetwork {
 public:
  BufferedCpuNetwork(const Network& network, int64_t batch, BufferCounts& counts)
      : network_(&network),
        batch_(batch),
        weights_(network.layers.size()),
        caches_(network.layers.size()),
        values_(network.layers.size() + 1),
        gradients_(network.layers.size() + 1),
        counts_(counts) {
    counts_.add(&BufferCounts::networks);
  }

  int64_t batch() const override { return batch_; }
  void load_weights(const Weights& weights, int64_t first, int64_t last) override {
    for (int64_t l = first; l <= last; ++l) weights_[static_cast<size_t>(l)] = weights[static_cast<size_t>(l)];
  }
  void forward_range(const Network& network, int64_t first, int64_t last, const Tensor* x) override {
    if (x != nullptr) values_[static_cast<size_t>(first)] = *x;
    Tensor in = held(values_, first, x == nullptr);
    for (int64_t c = first + 1; c <= last + 1; ++c) values_[static_cast<size_t>(c)].reset();
    std::vector<LayerCache> caches;
    Tensor y = trainsim::forward_range(network, weights_, first, last, std::move(in), caches);
    for (int64_t l = first; l <= last; ++l)
      caches_[static_cast<size_t>(l)] = std::move(caches[static_cast<size_t>(l - first)]);
    values_[static_cast<size_t>(last + 1)] = std::move(y);
  }
  double forward_range_loss(const Network& network, int64_t first, int64_t last, const Tensor* x,
                            std::span<const int32_t> labels, float dlogits_scale) override {
    forward_range(network, first, last, x);
    Tensor dlogits;
    const double mean = softmax_cross_entropy(*values_[static_cast<size_t>(last + 1)], labels, &dlogits);
    for (float& v : dlogits.data) v *= dlogits_scale;
    gradients_[static_cast<size_t>(last + 1)] = std::move(dlogits);
    return mean;
  }
  std::vector<std::vector<Tensor>> batch_statistics(int64_t first, int64_t last) const override {
    std::vector<std::vector<Tensor>> out;
    for (int64_t l = first; l <= last; ++l) {
      const LayerCache& cache = *caches_[static_cast<size_t>(l)];
      if (layer_of(l).init_statistics().empty()) {
        out.emplace_back();
      } else {
        out.push_back({cache.saved[2], cache.saved[3]});  // exec's batch norm keeps input, -, mean, variance
      }
    }
    return out;
  }
  void backward_range(const Network& network, int64_t first, int64_t last, const Tensor* dy,
                      Gradients& grads) override {
    if (dy != nullptr) gradients_[static_cast<size_t>(last + 1)] = *dy;
    Tensor in = held(gradients_, last + 1, dy == nullptr);
    std::vector<LayerCache> caches;
    for (int64_t l = first; l <= last; ++l) {
      std::optional<LayerCache>& cache = caches_[static_cast<size_t>(l)];
      TRAINSIM_CHECK(cache.has_value(), "a backward of layer " + std::to_string(l) + " without its forward");
      caches.push_back(std::move(*cache));
      cache.reset();
    }
    for (int64_t c = first; c <= last + 1; ++c) gradients_[static_cast<size_t>(c)].reset();
    gradients_[static_cast<size_t>(first)] =
        trainsim::backward_range(network, weights_, first, last, std::move(in), caches, grads);
  }
  Tensor cut_values(const Network&, int64_t i) override { return brought_back(values_, i); }
  Tensor cut_gradients(const Network&, int64_t i) override { return brought_back(gradients_, i); }

 private:
  const ExecLayer& layer_of(int64_t layer) const { return *network_->layers[static_cast<size_t>(layer)]; }

  Tensor held(const std::vector<std::optional<Tensor>>& cuts, int64_t i, bool in_place) {
    const std::optional<Tensor>& t = cuts[static_cast<size_t>(i)];
    TRAINSIM_CHECK(t.has_value(), "cut " + std::to_string(i) + " read in place, but no range left it");
    counts_.add(in_place ? &BufferCounts::in_place : &BufferCounts::uploads);
    return *t;
  }
  Tensor brought_back(const std::vector<std::optional<Tensor>>& cuts, int64_t i) {
    const std::optional<Tensor>& t = cuts[static_cast<size_t>(i)];
    TRAINSIM_CHECK(t.has_value(), "cut " + std::to_string(i) + " brought back, but no range left it");
    counts_.add(&BufferCounts::downloads);
    return *t;
  }

  const Network* network_;
  int64_t batch_;
  Weights weights_;
  std::vector<std::optional<LayerCache>> caches_;
  std::vector<std::optional<Tensor>> values_, gradients_;  // per cut
  BufferCounts& counts_;
};

bool carries_boundary(const Op& op) {
  return op.payload == Payload::kActivation || op.payload == Payload::kInputGradient;
}

int64_t boundary_sends(const Plan& plan) {
  int64_t sends = 0;
  for (const Op& op : plan.ops) sends += op.kind == OpKind::kSend && carries_boundary(op);
  return sends;
}

// The range inputs that come from the host: every batch a first forward
// reads, every recompute's (from the input its forward kept there), and
// every boundary received from another worker; the others are read in place.
int64_t host_inputs(const Plan& plan) {
  int64_t inputs = 0;
  for (const Op& op : plan.ops) {
    inputs += (op.kind == OpKind::kForward && op.first_layer == 0) || op.kind == OpKind::kRecompute;
    if (op.kind == OpKind::kRecv) inputs += carries_boundary(plan.ops[static_cast<size_t>(op.deps.front())]);
  }
  return inputs;
}

int64_t range_ops(const Plan& plan) {
  int64_t ops = 0;
  for (const Op& op : plan.ops) {
    ops += op.kind == OpKind::kForward || op.kind == OpKind::kBackward || op.kind == OpKind::kRecompute;
  }
  return ops;
}

// The strategy's run on lending devices over BufferedCpuNetworks beside its
// run on the CPU device.
void expect_lending_trains_as_the_cpu(const RunSpec& spec) {
  BufferCounts counts;
  RunSpec lending = spec;
  lending.make_device = [&](int32_t) {
    return make_lending_device([&](const Network& network, int64_t batch) {
      return std::make_unique<BufferedCpuNetwork>(network, batch, counts);
    });
  };
  const StrategyRun reference = strategy_runs::run(spec);
  const StrategyRun run = strategy_runs::run(lending);
  EXPECT_EQ(run.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(strategy_runs::largest_weight_gap(run.result.weights, reference.result.weights), 0.0);
  ASSERT_EQ(run.result.statistics.size(), reference.result.statistics.size());
  for (size_t l = 0; l < run.result.statistics.size(); ++l) {
    ASSERT_EQ(run.result.statistics[l].size(), reference.result.statistics[l].size());
    for (size_t p = 0; p < run.result.statistics[l].size(); ++p) {
      EXPECT_EQ(run.result.statistics[l][p].data, reference.result.statistics[l][p].data) << "layer " << l;
    }
  }
  // Every range input that is not the batch, a recompute's or a received
  // boundary is read where the pass's op before left it, and only the
  // boundaries sent come back.
  EXPECT_EQ(counts.uploads, host_inputs(run.plan));
  EXPECT_EQ(counts.in_place, range_ops(run.plan) - host_inputs(run.plan));
  EXPECT_GT(counts.in_place, 0);
  EXPECT_EQ(counts.downloads, boundary_sends(run.plan));
}

class LendingDevice : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDevice, TrainsAsTheCpuReadingAPasssBoundariesInPlace) {
  expect_lending_trains_as_the_cpu(GetParam().spec);
}

// Boundaries of several tensors (a residual branch crossing the cut: their
// gradients gather from both sides) and batch normalization's statistics.
const std::vector<strategy_runs::StrategyCase>& graph_cases() {
  using strategy_runs::batchnorm_mlp;
  using strategy_runs::residual_mlp;
  static const std::vector<strategy_runs::StrategyCase> all = {
      {"single_residual", {.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = residual_mlp}},
      {"dp_ring_residual", {.strategy = "dp-ring", .sgd = {0.1, 0.9, 0.0}, .make_model = residual_mlp}},
      {"gpipe_across_the_residual",
       {.strategy = "gpipe",
        .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = residual_mlp}},
      {"one_f_one_b_across_the_residual",
       {.strategy = "1f1b",
        .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = residual_mlp}},
      {"single_batchnorm", {.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = batchnorm_mlp}},
      {"gpipe_batchnorm",
       {.strategy = "gpipe",
        .settings = {{"microbatches", "1"}, {"stages", "0-1,2-4"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = batchnorm_mlp}},
  };
  return all;
}

class LendingDeviceGraphs : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDeviceGraphs, TrainsAsTheCpuReadingAPasssBoundariesInPlace) {
  expect_lending_trains_as_the_cpu(GetParam().spec);
}

// fmnist-mlp (0 flatten, 1 fc1, 2 relu1, 3 fc2, 4 relu2, 5 fc3, 6 softmax)
// at batch 8, called as the interpreter calls a device.
struct MlpCalls {
  Network network = build_network(build_zoo_model("fmnist-mlp"));
  Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  Tensor x;
  std::vector<int32_t> labels;
  BufferCounts counts;
  std::unique_ptr<Device> device = make_lending_device(
      [this](const Network& n, int64_t batch) { return std::make_unique<BufferedCpuNetwork>(n, batch, counts); });
  MlpCalls() { strategy_runs::synthetic_batch(0, 8, x, labels); }
};

// A forward's output left on the device comes back as the CPU computes it;
// the next forward of its pass reads it in place. A copy still held (DSP's
// recompute keeps its forward's input) goes to the host before a later op
// of the pass may overwrite it, and still holds the values it had.
TEST(LendingDeviceCalls, AKeptTensorComesBackAsComputedEvenAfterLaterOps) {
  MlpCalls m;
  std::vector<LayerCache> reference_caches;
  const Tensor h = forward_range(m.network, m.weights, 0, 2, m.x, reference_caches);
  std::vector<LayerCache> caches0, caches1;
  Tensor kept = m.device->forward(m.network, m.weights, 1, PassId{0, 0}, 0, 2, m.x, caches0);
  ASSERT_NE(kept.resident, nullptr);
  EXPECT_TRUE(kept.data.empty());
  EXPECT_EQ(kept.shape, h.shape);
  const Tensor copy = kept;  // held past the next op
  Tensor dlogits;
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(kept), caches1, m.labels, 1.0f,
                         dlogits);
  EXPECT_EQ(m.counts.in_place, 1);
  Gradients grads = zero_gradients(m.network, m.weights);
  m.device->backward(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(dlogits), caches1, grads);
  EXPECT_EQ(m.counts.in_place, 2);
  EXPECT_EQ(m.counts.downloads, 1);  // the copy, before the backward ran
  Tensor back = copy;
  m.device->to_host(back);
  EXPECT_EQ(back.resident, nullptr);
  EXPECT_EQ(back.data, h.data);
  EXPECT_EQ(m.counts.downloads, 1);  // already on the host
}

// Passes in flight at once each borrow a network; one that has ended
// (its caches and tensors gone) lends its network to the next.
TEST(LendingDeviceCalls, PassesInFlightBorrowNetworksOfTheirOwn) {
  MlpCalls m;
  std::vector<LayerCache> a, b;
  Tensor ya = m.device->forward(m.network, m.weights, 1, PassId{0, 0}, 0, 2, m.x, a);
  Tensor yb = m.device->forward(m.network, m.weights, 1, PassId{0, 1}, 0, 2, m.x, b);
  EXPECT_EQ(m.counts.networks, 2);
  ya = Tensor();
  a.clear();
  std::vector<LayerCache> c;
  m.device->forward(m.network, m.weights, 1, PassId{1, 0}, 0, 2, m.x, c);
  EXPECT_EQ(m.counts.networks, 2);
  EXPECT_EQ(m.counts.uploads, 3);
}

// A tensor another device keeps is refused, not read as empty.
TEST(LendingDeviceCalls, RefusesATensorAnotherDeviceKeeps) {
  MlpCalls m, other;
  std::vector<LayerCache> caches;
  Tensor theirs = other.device->forward(other.network, other.weights, 1, PassId{0, 0}, 0, 2, other.x, caches);
  EXPECT_THROW(m.device->to_host(theirs), std::logic_error);
  std::vector<LayerCache> mine;
  EXPECT_THROW(m.device->forward(m.network, m.weights, 1, PassId{0, 0}, 3, 5, theirs, mine), std::logic_error);
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, LendingDevice, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(Graphs, LendingDeviceGraphs, testing::ValuesIn(graph_cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace trainsim
