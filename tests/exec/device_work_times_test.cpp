// A compute op's work timed where its device runs it
// (ExecOptions::time_device_work, Device::time_work_of, OpWorkMarks): on the
// lending device over the CPU stand-in network, whose work is done as each
// call returns, and with marks whose work ends when a test says.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "exec/tensor/work_marks.hpp"
#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

bool runs_on_a_network(OpKind kind) {
  return kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kRecompute;
}

// The spec on lending devices over the stand-in network, a store shared;
// with `one_memory`, all of one memory (virtual devices on one GPU), their
// boundaries passed through arrays of the store.
StrategyRun on_stand_ins(RunSpec spec, bool time_device_work, BufferCounts* counted = nullptr,
                         bool one_memory = false) {
  BufferCounts own;
  BufferCounts& counts = counted != nullptr ? *counted : own;
  auto store = std::make_shared<CountingStore>(counts);
  spec.time_device_work = time_device_work;
  spec.make_device = [&counts, store, one_memory](int32_t) {
    return make_lending_device(
        [&counts](const Network& n, int64_t batch, const HeldLayers& held) {
          return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
        },
        store, one_memory ? 0 : -1);
  };
  return strategy_runs::run(spec);
}

// Each op's calls into the GPU libraries, made on its own thread, counted
// around it and written into the run's trace: here the stand-in network's
// one per range it runs, a forward's and a backward's each, none elsewhere.
TEST(LibraryCalls, EachOpCountsTheCallsItsThreadMadeAndTheTraceShowsThem) {
  for (const std::string strategy : {"single", "gpipe", "dp-ring"}) {
    SCOPED_TRACE(strategy);
    RunSpec spec;
    spec.strategy = strategy;
    const StrategyRun run = on_stand_ins(spec, false);
    const nlohmann::json trace = exec_chrome_trace(run.plan, run.result);
    int64_t shown = 0;
    for (const nlohmann::json& e : trace.at("traceEvents"))
      shown += e.contains("args") && e["args"].contains("library_calls");
    int64_t counted = 0;
    for (size_t id = 0; id < run.plan.ops.size(); ++id) {
      const OpKind kind = run.plan.ops[id].kind;
      const bool runs = kind == OpKind::kForward || kind == OpKind::kBackward;
      EXPECT_EQ(run.result.timings[id].library_calls, runs ? 1 : 0) << op_kind_name(kind) << " " << id;
      counted += runs;
    }
    EXPECT_EQ(shown, counted);
    EXPECT_GT(counted, 0);
  }
}

class DeviceWorkTimes : public testing::TestWithParam<std::string> {};

// The stand-in's work is done by the time each call returns, so each
// forward's, backward's and recompute's timed work lies within the op as
// the host timed it; every other op's work is not the device's to time.
TEST_P(DeviceWorkTimes, EachComputeOpsWorkIsTimedWithinTheOp) {
  RunSpec spec;
  spec.strategy = GetParam();
  const StrategyRun run = on_stand_ins(spec, true);
  int64_t timed = 0;
  for (size_t id = 0; id < run.plan.ops.size(); ++id) {
    const Op& op = run.plan.ops[id];
    const ExecOpTiming& t = run.result.timings[id];
    if (!runs_on_a_network(op.kind)) {
      EXPECT_TRUE(std::isnan(t.device_start_s) && std::isnan(t.device_end_s)) << op_kind_name(op.kind) << " " << id;
      continue;
    }
    ++timed;
    ASSERT_FALSE(std::isnan(t.device_start_s) || std::isnan(t.device_end_s)) << op_kind_name(op.kind) << " " << id;
    constexpr double kClockRounding = 1e-6;
    EXPECT_LE(t.start_s, t.device_start_s + kClockRounding) << id;
    EXPECT_LE(t.device_start_s, t.device_end_s) << id;
    EXPECT_LE(t.device_end_s, t.end_s + kClockRounding) << id;
  }
  EXPECT_GT(timed, 0);
}

// Unasked, nothing is timed; nor on the CPU device, whose work is the op's.
TEST_P(DeviceWorkTimes, NothingIsTimedUnaskedOrOnTheCpuDevice) {
  RunSpec spec;
  spec.strategy = GetParam();
  const StrategyRun unasked = on_stand_ins(spec, false);
  spec.time_device_work = true;
  const StrategyRun cpu = strategy_runs::run(spec);
  for (const StrategyRun* run : {&unasked, &cpu}) {
    for (const ExecOpTiming& t : run->result.timings) {
      EXPECT_TRUE(std::isnan(t.device_start_s) && std::isnan(t.device_end_s));
    }
  }
}

// The run's trace shows each timed op's work on a thread of its worker
// after the plan's streams', named once per worker.
TEST_P(DeviceWorkTimes, TheTraceShowsTheWorkBesideTheOps) {
  RunSpec spec;
  spec.strategy = GetParam();
  const StrategyRun run = on_stand_ins(spec, true);
  const nlohmann::json trace = exec_chrome_trace(run.plan, run.result);
  int64_t work = 0, named = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["tid"] != kStreamKinds) continue;
    if (e["ph"] == "M") {
      ++named;
      continue;
    }
    ++work;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  int64_t timed = 0;
  for (const Op& op : run.plan.ops) timed += runs_on_a_network(op.kind);
  EXPECT_EQ(work, timed);
  EXPECT_EQ(named, static_cast<int64_t>(run.plan.workers.size()));
}

// A range whose input another worker's network exported into the store
// waits for it before its work's start is marked (on a GPU, the sender's
// kernels are not the receiver's time), timed or not.
TEST_P(DeviceWorkTimes, ARangeWaitsForItsInputFromAnotherNetworkBeforeItsWorkStarts) {
  RunSpec spec;
  spec.strategy = GetParam();
  for (const bool timed : {false, true}) {
    BufferCounts counts;
    on_stand_ins(spec, timed, &counts, /*one_memory=*/true);
    EXPECT_EQ(counts.input_waits, counts.imports);
    if (GetParam() != "single" && GetParam() != "dp-ring") {
      EXPECT_GT(counts.imports, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DeviceWorkTimes, testing::Values("single", "dp-ring", "gpipe", "dsp", "pipedream"),
                         [](const testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// A mark whose work ends when the test says, at a time it sets.
struct HeldMark final : WorkMark {
  bool ended = false;
  double at_s = 0;
  int64_t* waits = nullptr;  // counts the waits for it
  bool done() override { return ended; }
  double done_s() override {
    if (!ended) {
      ++*waits;
      ended = true;
    }
    return at_s;
  }
  double seconds_since(WorkMark& earlier) override { return done_s() - earlier.done_s(); }
};

// A network that only makes marks, each at the next time the test gives.
struct MarkingNetwork final : RangeNetwork {
  std::vector<std::shared_ptr<HeldMark>> made;
  double next_s = 0;
  int64_t waits = 0;
  std::shared_ptr<WorkMark> mark() override {
    auto m = std::make_shared<HeldMark>();
    m->at_s = next_s;
    m->waits = &waits;
    made.push_back(m);
    return m;
  }
  int64_t batch() const override { return 1; }
  void load_weights(const Weights&, int64_t, int64_t) override {}
  void forward_range(const Network&, int64_t, int64_t, const Tensor*) override {}
  PendingLoss forward_range_loss(const Network&, int64_t, int64_t, const Tensor*, std::span<const int32_t>,
                                 float) override {
    return PendingLoss(0.0);
  }
  std::vector<std::vector<Tensor>> batch_statistics(int64_t, int64_t) const override { return {}; }
  void backward_range(const Network&, int64_t, int64_t, const Tensor*, Gradients&) override {}
  void fold_statistics(int64_t, KeptValues&, KeptValues&) override {}
  void load_kept_weights(int64_t, std::span<KeptValues* const>) override {}
  Tensor cut_values(const Network&, int64_t) override { return {}; }
  Tensor cut_gradients(const Network&, int64_t) override { return {}; }
  std::shared_ptr<KeptValues> export_cut(const Network&, int64_t, bool, DeviceStore&) override { return nullptr; }
};

// An op's times run from the mark before its first piece of work to the
// one after its last; an op's marks go once its work is done, without a
// wait, and only the ops still under way are waited for at the end.
TEST(OpWorkMarks, AnOpRunsFromItsFirstWorkToItsLastAndItsMarksGoOnceDone) {
  MarkingNetwork net;
  OpWorkMarks marks;
  marks.before(net);  // no op named: nothing marked
  EXPECT_TRUE(net.made.empty());
  marks.time(4);  // two pieces: 1.0 to 1.5, 2.0 to 3.0 s
  net.next_s = 1.0;
  marks.before(net);
  net.next_s = 1.5;
  marks.after(net);
  net.next_s = 2.0;
  marks.before(net);  // a later piece of op 4: no new start
  net.next_s = 3.0;
  marks.after(net);
  ASSERT_EQ(net.made.size(), 3u);  // op 4's start, then an end each piece (the last stands)
  marks.time(-1);
  marks.time(7);
  net.made[0]->ended = net.made[1]->ended = net.made[2]->ended = true;  // op 4's work is done
  net.next_s = 5.0;
  marks.before(net);  // settles op 4 first, without a wait
  net.next_s = 5.25;
  marks.after(net);
  marks.time(-1);
  const std::vector<Device::WorkTime> times = marks.times();  // waits for op 7's
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].op, 4);
  EXPECT_DOUBLE_EQ(times[0].start_s, 1.0);
  EXPECT_DOUBLE_EQ(times[0].end_s, 3.0);
  EXPECT_EQ(times[1].op, 7);
  EXPECT_DOUBLE_EQ(times[1].start_s, 5.0);
  EXPECT_DOUBLE_EQ(times[1].end_s, 5.25);
  EXPECT_EQ(net.waits, 2);  // op 7's start and end, waited for by times()
}

// An op whose work is still under way holds the later ones' marks (the
// device runs them in order), and an op that queued no work has no times.
TEST(OpWorkMarks, WorkUnderWayHoldsTheMarksAfterIt) {
  MarkingNetwork net;
  OpWorkMarks marks;
  marks.time(1);
  marks.before(net);
  marks.after(net);
  marks.time(2);  // queues nothing
  marks.time(3);
  marks.before(net);
  marks.after(net);
  marks.time(4);
  marks.before(net);  // op 1's work not done: nothing settled, nothing waited for
  EXPECT_EQ(net.waits, 0);
  marks.after(net);
  marks.time(-1);
  const std::vector<Device::WorkTime> times = marks.times();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].op, 1);
  EXPECT_EQ(times[1].op, 3);
  EXPECT_EQ(times[2].op, 4);
}

}  // namespace
}  // namespace trainsim
