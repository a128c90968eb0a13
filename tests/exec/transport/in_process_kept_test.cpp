// Boundaries passed between workers of one process whose devices cannot
// read each other's memory, without the host (InProcessTransport with a
// KeptPasser), as NCCL's send and receive pass them between GPUs that are
// not peers: here a passer whose messages, like NCCL's, carry no tags (a
// direction's n-th receive takes its n-th send), over the CPU stand-in's
// stores. The transport keeps each sender's order whatever order the
// receiver takes them in, and every strategy trains bit for bit as the
// CPU's with no boundary brought to a host.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/tensor/range_network.hpp"
#include "exec/transport/in_process.hpp"
#include "exec/transport/library_member.hpp"
#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::CountingStore;
using buffered::kept_values;
using Directions = std::vector<std::pair<int, int>>;

// Copies of the arrays in one FIFO per direction: a receive takes the
// direction's next array whichever the transport meant, so one out of the
// sender's order gets another array (of another size, or other values).
class UntaggedPasser final : public KeptPasser {
 public:
  void open(std::span<const std::pair<int, int>> directions, const std::function<bool()>&) override {
    const std::lock_guard lock(mu_);
    for (const auto& d : paths_.fresh(directions)) opened.push_back(d);
  }
  bool send(int from, int to, KeptValues& values, int64_t floats, const std::function<bool()>&) override {
    const std::lock_guard lock(mu_);
    EXPECT_TRUE(std::find(opened.begin(), opened.end(), std::pair{from, to}) != opened.end())
        << "an array passed from " << from << " to " << to << " before the direction was opened";
    const std::vector<float>& data = kept_values(values).data;
    EXPECT_EQ(static_cast<int64_t>(data.size()), floats);
    queues_[{from, to}].push_back(data);
    ++sends;
    arrived_.notify_all();
    return true;
  }
  // NCCL's receive is queued and the array's later work waits for it; this
  // one waits for the send, which follows its header at once.
  bool recv(int to, int from, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) override {
    std::unique_lock lock(mu_);
    std::deque<std::vector<float>>& queue = queues_[{from, to}];
    while (queue.empty()) {
      if (aborted()) return false;
      arrived_.wait_for(lock, std::chrono::milliseconds(10));
    }
    std::vector<float> data = std::move(queue.front());
    queue.pop_front();
    EXPECT_EQ(static_cast<int64_t>(data.size()), floats) << "a receive met another array: out of the sender's order";
    data.resize(static_cast<size_t>(floats));
    kept_values(into).data = std::move(data);
    ++receives;
    return true;
  }

  void abandon() override { abandoned = true; }

  Directions opened;
  int64_t sends = 0;
  int64_t receives = 0;
  std::atomic<bool> abandoned{false};

 private:
  std::mutex mu_;
  std::condition_variable arrived_;
  OpenedPaths paths_;
  std::map<std::pair<int, int>, std::deque<std::vector<float>>> queues_;
};

struct Stand {
  BufferCounts counts;
  std::shared_ptr<CountingStore> store = std::make_shared<CountingStore>(counts, 0);
  int64_t made = 0;
  MakeKept make = [this](int64_t floats) {
    ++made;
    return std::make_shared<ExportedBoundary>(ExportedBoundary{store, store->uninitialized(floats), 0});
  };
  std::shared_ptr<const ExportedBoundary> array(std::vector<float> values) {
    return std::make_shared<ExportedBoundary>(ExportedBoundary{store, store->from_host(values), 0});
  }
};

// Worker 0 passes arrays of 3, 5 and 7 values (tags 10, 11, 12) to worker
// 1, which takes the last first: each arrives whole under its own tag.
TEST(InProcessTransportKept, ArraysArriveUnderTheirTagsInWhateverOrderTheyAreTaken) {
  auto passer = std::make_shared<UntaggedPasser>();
  InProcessTransport t(2);
  EXPECT_FALSE(t.passes_kept(0, 1));
  t.pass_kept_by(passer);
  EXPECT_TRUE(t.passes_kept(0, 1));
  EXPECT_FALSE(t.passes_kept(1, 1));
  t.open_kept_paths({{0, 1}});
  EXPECT_EQ(passer->opened, (Directions{{0, 1}}));
  Stand stand;
  const std::vector<int64_t> tags = {10, 11, 12};
  for (size_t k = 0; k < tags.size(); ++k) {
    std::vector<float> values(3 + 2 * k);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(tags[k] * 100 + i);
    t.pass_kept(0, 1, tags[k], *stand.array(values), static_cast<int64_t>(values.size()));
  }
  // The bytes counted; the messages are the caller's (the op's own, sent with the tag).
  EXPECT_EQ(t.traffic().pair_bytes[0][1], (3 + 5 + 7) * 4);
  EXPECT_EQ(t.traffic().pair_messages[0][1], 0);
  for (const size_t k : {2, 0, 1}) {
    const PassedKept passed = t.take_kept(1, 0, tags[k], stand.make);
    ASSERT_NE(passed.array, nullptr);
    EXPECT_EQ(passed.floats, static_cast<int64_t>(3 + 2 * k));
    const std::vector<float>& got = kept_values(*passed.array->values).data;
    ASSERT_EQ(static_cast<int64_t>(got.size()), passed.floats);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(tags[k] * 100 + i)) << k;
    EXPECT_EQ(stand.made, 3);  // all three received while the first take waited for tag 12
  }
  EXPECT_EQ(passer->receives, 3);
}

TEST(InProcessTransportKept, WithoutAPasserNothingIsPassed) {
  InProcessTransport t(2);
  EXPECT_FALSE(t.passes_kept(0, 1));
  t.open_kept_paths({{0, 1}});  // a no-op
  Stand stand;
  EXPECT_THROW(t.pass_kept(0, 1, 5, *stand.array({1, 2}), 2), std::logic_error);
  EXPECT_THROW(t.take_kept(1, 0, 5, stand.make), std::logic_error);
}

// A take waiting for its array's header ends when another worker fails,
// and on its own past the transport's timeout, naming what it waited for;
// the abort has the passer end its messages (NCCL's queued ones, which a
// failed run would never match).
TEST(InProcessTransportKept, ATakeWaitingForItsArrayEndsOnAnAbortOrTheTimeout) {
  Stand stand;
  {
    InProcessTransport t(2);
    auto passer = std::make_shared<UntaggedPasser>();
    t.pass_kept_by(passer);
    auto waiting = std::async(std::launch::async, [&] { return t.take_kept(1, 0, 7, stand.make); });
    EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    EXPECT_FALSE(passer->abandoned);
    t.abort("worker 0 failed");
    EXPECT_THROW(waiting.get(), TransportAborted);
    EXPECT_TRUE(passer->abandoned);
  }
  InProcessTransport t(2, /*recv_timeout_s=*/0.05);
  t.pass_kept_by(std::make_shared<UntaggedPasser>());
  try {
    t.take_kept(1, 0, 7, stand.make);
    ADD_FAILURE() << "a take with no array passed returned";
  } catch (const TransportAborted& e) {
    EXPECT_NE(std::string(e.what()).find("worker 1 waited over"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("for an array from worker 0 with tag 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(stand.made, 0);
}

// Every strategy on workers of memories apart (GPUs that are not peers),
// each with a store of its own: every boundary goes from the sender's store
// through the passer into an array of the receiver's, opened before the
// run in the plan's order; none comes to a host, and the run trains bit for
// bit as the CPU's, its traffic counted as through the hosts.
class LendingDeviceOnMemoriesApart : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(LendingDeviceOnMemoriesApart, PassesBoundariesByThePasserWithoutTheHost) {
  auto passer = std::make_shared<UntaggedPasser>();
  buffered::BufferCounts::Totals totals;
  buffered::expect_lending_trains_as_the_cpu(
      GetParam().spec, &totals, [](int32_t w) { return int64_t{w}; }, [](int64_t, int64_t) { return false; },
      [passer](int endpoints) {
        auto t = std::make_unique<InProcessTransport>(endpoints, /*recv_timeout_s=*/60);
        t->pass_kept_by(passer);
        return t;
      });
  const Plan plan = strategy_runs::plan_of(GetParam().spec);
  Directions directions;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kSend || !buffered::carries_boundary(op)) continue;
    if (std::find(directions.begin(), directions.end(), std::pair{op.worker, op.peer}) == directions.end()) {
      directions.emplace_back(op.worker, op.peer);
    }
  }
  EXPECT_EQ(passer->opened, directions);
  EXPECT_EQ(passer->sends, buffered::boundary_sends(plan));
  EXPECT_EQ(passer->receives, buffered::boundary_sends(plan));
  EXPECT_EQ(totals.downloads, 0);
  EXPECT_EQ(totals.exports, buffered::boundary_sends(plan));
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, LendingDeviceOnMemoriesApart, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(Graphs, LendingDeviceOnMemoriesApart, testing::ValuesIn(strategy_runs::graph_cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace trainsim
