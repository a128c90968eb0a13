// The lending device (exec/tensor/lending_device.hpp), as the GPU device
// runs it, over the CPU stand-in of a GPU network
// (tests/exec/buffered_cpu_network.hpp): it trains every strategy bit for
// bit as the CPU device, reading a pass's boundaries in place and bringing
// to the host only those sent to another worker whose device does not
// share its memory.
#include "exec/tensor/lending_device.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::MlpCalls;

class LendingDevice : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDevice, TrainsAsTheCpuReadingAPasssBoundariesInPlace) {
  buffered::expect_lending_trains_as_the_cpu(GetParam().spec);
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
  buffered::expect_lending_trains_as_the_cpu(GetParam().spec);
}

// Workers whose devices share one memory (virtual devices on one GPU) pass
// their boundaries device to device, exported into an array of the
// sender's store and read from there by the receiver's network: every
// strategy still trains bit for bit as the CPU, its traffic counted as
// before, and no boundary comes to the host.
class LendingDeviceOnOneMemory : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDeviceOnOneMemory, PassesBoundariesWithoutTheHost) {
  buffered::expect_lending_trains_as_the_cpu(GetParam().spec, nullptr, [](int32_t) { return int64_t{0}; });
}

// Three stages, the first two on one memory and the third on another: the
// boundaries between the first two pass device to device, those to and
// from the third through the host.
TEST(LendingDeviceCalls, ABoundaryToAnotherMemoryGoesThroughTheHost) {
  strategy_runs::RunSpec spec{.strategy = "1f1b",
                              .settings = {{"microbatches", "4"}, {"stages", "0-2,3-4,5-6"}},
                              .sgd = {0.1, 0.9, 0.0},
                              .per_machine = 3};
  buffered::expect_lending_trains_as_the_cpu(spec, nullptr, [](int32_t w) { return int64_t{w < 2 ? 0 : 1}; });
}

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

// With a store, such a copy is set aside into an array of it instead (no
// wait): read from there by a later forward of another pass, brought to
// the host from there, or copied on the device into an array of its own
// for a device of the same memory.
TEST(LendingDeviceCalls, WithAStoreAKeptTensorIsSetAsideOnTheDevice) {
  MlpCalls m;
  m.device = make_lending_device(
      [&m](const Network& n, int64_t batch) {
        return std::make_unique<buffered::BufferedCpuNetwork>(n, batch, m.counts);
      },
      std::make_shared<buffered::CountingStore>(m.counts), /*shared_memory=*/0);
  std::vector<LayerCache> reference_caches;
  const Tensor h = forward_range(m.network, m.weights, 0, 2, m.x, reference_caches);
  const Tensor y = forward_range(m.network, m.weights, 3, 5, h, reference_caches);
  std::vector<LayerCache> caches0, caches1, caches2;
  Tensor kept = m.device->forward(m.network, m.weights, 1, PassId{0, 0}, 0, 2, m.x, caches0);
  const Tensor copy = kept;  // held past the next ops
  Tensor dlogits;
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(kept), caches1, m.labels, 1.0f,
                         dlogits);
  Gradients grads = m.device->zero_gradients(m.network, m.weights);
  m.device->backward(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(dlogits), caches1, grads);
  EXPECT_EQ(m.counts.exports, 1);  // the copy, before the backward ran
  EXPECT_EQ(m.counts.downloads, 0);
  Tensor y_device = m.device->forward(m.network, m.weights, 1, PassId{1, 0}, 3, 5, copy, caches2);
  EXPECT_EQ(m.counts.imports, 1);
  m.device->to_host(y_device);
  EXPECT_EQ(y_device.data, y.data);
  const Tensor passed = m.device->export_boundary(copy);
  ASSERT_NE(passed.exported, nullptr);
  EXPECT_EQ(m.counts.exports, 1);  // from the array it was set aside into
  EXPECT_EQ(m.counts.copies, 1);
  EXPECT_EQ(buffered::kept_values(*passed.exported->values).data, h.data);
  Tensor back = copy;
  m.device->to_host(back);
  EXPECT_EQ(back.resident, nullptr);
  EXPECT_EQ(back.data, h.data);
  EXPECT_EQ(m.counts.downloads, 1);  // y_device alone came back from a network's buffers
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

// A worker's compute ops go one after another whichever network each pass
// borrowed, as the plan's compute stream orders them: a range on another
// network than the last range's queues after that one's work; a range on
// the same network is in order already.
TEST(LendingDeviceCalls, ARangeOnAnotherNetworkQueuesAfterTheLastRangesWork) {
  MlpCalls m;
  std::vector<LayerCache> a0, b0, a1, b1;
  Tensor ya = m.device->forward(m.network, m.weights, 1, PassId{0, 0}, 0, 2, m.x, a0);
  EXPECT_TRUE(m.counts.queued_after.empty());  // the first range
  Tensor yb = m.device->forward(m.network, m.weights, 1, PassId{0, 1}, 0, 2, m.x, b0);
  ASSERT_EQ(m.counts.queued_after.size(), 1u);
  const auto [first, second] = m.counts.queued_after.front();
  EXPECT_NE(first, second);
  Tensor db, da;
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 1}, 3, 6, std::move(yb), b1, m.labels, 1.0f, db);
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(ya), a1, m.labels, 1.0f, da);
  Gradients grads = zero_gradients(m.network, m.weights);
  m.device->backward(m.network, m.weights, 1, PassId{0, 0}, 3, 6, std::move(da), a1, grads);
  m.device->backward(m.network, m.weights, 1, PassId{0, 1}, 3, 6, std::move(db), b1, grads);
  using Order = std::pair<const RangeNetwork*, const RangeNetwork*>;
  EXPECT_EQ(m.counts.queued_after, (std::vector<Order>{{first, second}, {second, first}, {first, second}}));
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
INSTANTIATE_TEST_SUITE_P(EveryStrategy, LendingDeviceOnOneMemory, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(Graphs, LendingDeviceOnOneMemory, testing::ValuesIn(graph_cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace trainsim
