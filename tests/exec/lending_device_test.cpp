// The lending device (exec/tensor/lending_device.hpp), as the GPU device
// runs it, over the CPU stand-in of a GPU network
// (tests/exec/buffered_cpu_network.hpp): it trains every strategy bit for
// bit as the CPU device, reading a pass's boundaries in place and bringing
// to the host only those sent to another worker whose device does not
// share its memory.
#include "exec/tensor/lending_device.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/mlp_calls.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::MlpCalls;
using strategy_runs::graph_cases;

class LendingDevice : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDevice, TrainsAsTheCpuReadingAPasssBoundariesInPlace) {
  buffered::expect_lending_trains_as_the_cpu(GetParam().spec);
}

class LendingDeviceGraphs : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDeviceGraphs, TrainsAsTheCpuReadingAPasssBoundariesInPlace) {
  buffered::expect_lending_trains_as_the_cpu(GetParam().spec);
}

// Each network a worker's passes borrow holds the layers of that worker's
// ops alone (expect_lending_trains_as_the_cpu checks each against the
// plan; the stand-in refuses any other layer or cut): a pipeline stage's
// networks hold fewer than the model's layers, `single`'s every one.
TEST(LendingDeviceCalls, AStagesNetworksHoldItsOwnLayersAlone) {
  for (const std::string name : {"single", "gpipe", "dsp", "dualpipe_spectrain"}) {
    SCOPED_TRACE(name);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(strategy_runs::case_named(name), &t);
    ASSERT_GT(t.layers, 1);
    if (name == "single") {
      EXPECT_EQ(t.most_layers_held, t.layers);
    } else {
      EXPECT_GT(t.most_layers_held, 0);
      EXPECT_LT(t.most_layers_held, t.layers);
    }
  }
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

// Workers on memories that read each other's (GPUs that are peers), each
// worker with a store of its own: a boundary goes device to device,
// exported into the sender's store and, between two memories, copied from
// there into the receiver's once when received (the stand-in refuses
// another memory's array); between two workers of one memory it is read
// where it was exported. Every strategy still trains bit for bit as the
// CPU, and no boundary comes to the host; each worker on a memory of its
// own, then two workers to a memory.
class LendingDeviceOnPeerMemories : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDeviceOnPeerMemories, PassesBoundariesWithoutTheHost) {
  const auto all_peers = [](int64_t, int64_t) { return true; };
  buffered::expect_lending_trains_as_the_cpu(
      GetParam().spec, nullptr, [](int32_t w) { return int64_t{w}; }, all_peers);
  buffered::expect_lending_trains_as_the_cpu(
      GetParam().spec, nullptr, [](int32_t w) { return int64_t{w / 2}; }, all_peers);
}

// Three stages on three memories, the first two peers and the third
// reading neither: between the first two boundaries pass device to
// device, to and from the third through the host.
TEST(LendingDeviceCalls, ABoundaryToAMemoryThatIsNoPeerGoesThroughTheHost) {
  strategy_runs::RunSpec spec{.strategy = "1f1b",
                              .settings = {{"microbatches", "4"}, {"stages", "0-2,3-4,5-6"}},
                              .sgd = {0.1, 0.9, 0.0},
                              .per_machine = 3};
  buffered::expect_lending_trains_as_the_cpu(
      spec, nullptr, [](int32_t w) { return int64_t{w}; }, [](int64_t a, int64_t b) { return a + b == 1; });
}

// A device reaches those of its memory and of the memories it is told
// read it; none without a store, and never a device keeping no memory.
TEST(LendingDeviceCalls, ADeviceReachesItsMemoryAndItsPeersAlone) {
  BufferCounts counts;
  const auto device = [&](int64_t memory, bool store, ReachesMemory reaches = nullptr) {
    return make_lending_device(
        [&](const Network& n, int64_t batch, const HeldLayers& held) {
          return std::make_unique<buffered::BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
        },
        store ? std::make_shared<buffered::CountingStore>(counts) : nullptr, memory, std::move(reaches));
  };
  const std::unique_ptr<Device> zero = device(0, true, [](int64_t other) { return other == 1; });
  const std::unique_ptr<Device> also_zero = device(0, true), one = device(1, true), two = device(2, true);
  const std::unique_ptr<Device> storeless = device(1, false), cpu = device(-1, true);
  EXPECT_TRUE(zero->reaches(*also_zero));
  EXPECT_TRUE(zero->reaches(*one));
  EXPECT_FALSE(zero->reaches(*two));
  EXPECT_FALSE(one->reaches(*zero));  // told of no peer
  EXPECT_FALSE(zero->reaches(*storeless));
  EXPECT_FALSE(zero->reaches(*cpu));
  EXPECT_FALSE(cpu->reaches(*cpu));
}

// A boundary exported for a device of a peer memory is copied into the
// receiver's store once, when taken in (Device::import_boundary, as the
// interpreter's recv does): the forwards reading it, a second one (a
// recompute) included, read that copy. One never taken in is copied when
// read, as a network reads only its own memory's arrays.
TEST(LendingDeviceCalls, ABoundaryFromAPeerMemoryIsCopiedOnceWhenTakenIn) {
  MlpCalls m;
  const auto device = [&m](int64_t memory) {
    auto store = std::make_shared<buffered::CountingStore>(m.counts, memory);
    return make_lending_device(
        [&m, own = store.get()](const Network& n, int64_t batch, const HeldLayers& held) {
          return std::make_unique<buffered::BufferedCpuNetwork>(n, batch, m.counts, own, &held);
        },
        store, memory, [](int64_t) { return true; });
  };
  const std::unique_ptr<Device> zero = device(0), one = device(1);
  std::vector<LayerCache> reference_caches;
  const Tensor h = forward_range(m.network, m.weights, 0, 2, m.x, reference_caches);
  const Tensor y = forward_range(m.network, m.weights, 3, 5, h, reference_caches);
  std::vector<LayerCache> caches0, caches1, caches2, caches3;
  ASSERT_TRUE(zero->reaches(*one));
  const Tensor sent = zero->export_boundary(zero->forward(m.network, m.weights, 1, PassId{0, 0}, 0, 2, m.x, caches0));
  ASSERT_NE(sent.exported, nullptr);
  EXPECT_EQ(sent.exported->memory, 0);
  EXPECT_EQ(m.counts.peer_copies, 0);
  const Tensor taken = one->import_boundary(sent);
  EXPECT_EQ(m.counts.peer_copies, 1);
  ASSERT_NE(taken.exported, nullptr);
  EXPECT_EQ(taken.exported->memory, 1);
  Tensor y1 = one->forward(m.network, m.weights, 1, PassId{0, 0}, 3, 5, taken, caches1);
  Tensor y2 = one->forward(m.network, m.weights, 1, PassId{0, 1}, 3, 5, taken, caches2);
  EXPECT_EQ(m.counts.peer_copies, 1);
  EXPECT_EQ(m.counts.imports, 2);
  one->to_host(y1);
  one->to_host(y2);
  EXPECT_EQ(y1.data, y.data);
  EXPECT_EQ(y2.data, y.data);
  Tensor y3 = one->forward(m.network, m.weights, 1, PassId{0, 2}, 3, 5, sent, caches3);
  EXPECT_EQ(m.counts.peer_copies, 2);
  one->to_host(y3);
  EXPECT_EQ(y3.data, y.data);
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
      [&m](const Network& n, int64_t batch, const HeldLayers& held) {
        return std::make_unique<buffered::BufferedCpuNetwork>(n, batch, m.counts, nullptr, &held);
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
INSTANTIATE_TEST_SUITE_P(EveryStrategy, LendingDeviceOnPeerMemories, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(Graphs, LendingDeviceOnPeerMemories, testing::ValuesIn(graph_cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace trainsim
