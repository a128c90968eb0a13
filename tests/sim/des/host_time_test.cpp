// A GPU worker's host time per compute op (DeviceSpec::host_per_op): an op
// holds its worker's host for its kind's fixed_s + layers · per_layer_s and
// its device for its work, and ends when both are done. Clusters are
// simple_cluster's round numbers.
#include <gtest/gtest.h>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::simple_cluster;
using testing_fixtures::simulate_built;

constexpr SimTime kUs = 1000;  // nanoseconds

Op over_layers(Op op, int32_t first, int32_t last) {
  op.first_layer = first;
  op.last_layer = last;
  return op;
}

// One worker: a forward, backward and update over layers 0-2, of 50, 200
// and 10 us of work. The host takes 40 + 10/layer = 70 us a forward, 60 us
// a backward, 100 us an update: the forward ends at max(50, 70) = 70 us;
// the backward's host part ends at 130, its work at 270; the update starts
// at 130, as the executor's host goes on once it has queued the backward,
// its work queued after the backward's (270-280), and ends at max(230,
// 280) = 280. Without a host time the work alone: 50, 250, 260.
TEST(DesHostTime, AComputeOpEndsWhenItsWorkAndItsHostPartAreDone) {
  for (const bool priced : {false, true}) {
    PlanBuilder b("test", 1, 1, 1);
    const OpId forward = b.add(over_layers(compute_op(0, 50e-6), 0, 2));
    const OpId backward = b.add(over_layers(compute_op(0, 200e-6, {}, 0, OpKind::kBackward), 0, 2));
    const OpId update = b.add(over_layers(compute_op(0, 10e-6, {}, 0, OpKind::kUpdate), 0, 2));
    Cluster cluster = simple_cluster(1, 1);
    if (priced) cluster.device.host_per_op = {{40e-6, 10e-6}, {60e-6, 0}, {100e-6, 0}};
    const SimResult r = simulate_built(b, cluster);
    EXPECT_EQ(r.timings[forward].end_ns, (priced ? 70 : 50) * kUs);
    EXPECT_EQ(r.timings[backward].start_ns, (priced ? 70 : 50) * kUs);
    EXPECT_EQ(r.timings[backward].end_ns, (priced ? 270 : 250) * kUs);
    EXPECT_EQ(r.timings[update].start_ns, (priced ? 130 : 250) * kUs);
    EXPECT_EQ(r.timings[update].end_ns, (priced ? 280 : 260) * kUs);
  }
}

// The host runs ahead of the device where the work is the longer: a
// forward of 100 us of work and 50 of host, then a backward of 50 us of
// work and 100 of host. The backward starts at 50, when the forward is
// queued, its work at 100 after the forward's, and ends at max(150, 150):
// 150 us, where an op starting only at the end of the one before would
// take 100 + 100 = 200. The worker's compute counts each moment once.
TEST(DesHostTime, TheHostQueuesTheNextOpWhileTheLastOnesWorkRuns) {
  PlanBuilder b("test", 1, 1, 1);
  const OpId forward = b.add(over_layers(compute_op(0, 100e-6), 0, 0));
  const OpId backward = b.add(over_layers(compute_op(0, 50e-6, {}, 0, OpKind::kBackward), 0, 0));
  Cluster cluster = simple_cluster(1, 1);
  cluster.device.host_per_op = {{50e-6, 0}, {100e-6, 0}, {}};
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[forward].end_ns, 100 * kUs);
  EXPECT_EQ(r.timings[backward].start_ns, 50 * kUs);
  EXPECT_EQ(r.timings[backward].end_ns, 150 * kUs);
  ASSERT_EQ(r.workers.size(), 1u);
  EXPECT_NEAR(r.workers[0].breakdown.total_s(), r.window_s, 1e-12);
}

// An op whose host part takes no time (a kind without one) lets the next
// go on at once too: a forward (100 us of work, 50 of host), an update of
// 10 us of work and no host time, another forward (10 us, 50 of host). The
// update starts at 50, the second forward at 50 too, its work queued after
// the update's (100-110, 110-120): it ends at 120, not 110 + 50.
TEST(DesHostTime, AnOpWithoutHostTimeLetsTheNextGoOnAtOnce) {
  PlanBuilder b("test", 1, 1, 1);
  b.add(over_layers(compute_op(0, 100e-6), 0, 0));
  const OpId update = b.add(over_layers(compute_op(0, 10e-6, {}, 0, OpKind::kUpdate), 0, 0));
  const OpId next = b.add(over_layers(compute_op(0, 10e-6), 0, 0));
  Cluster cluster = simple_cluster(1, 1);
  cluster.device.host_per_op.forward = {50e-6, 0};
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[update].start_ns, 50 * kUs);
  EXPECT_EQ(r.timings[update].end_ns, 110 * kUs);
  EXPECT_EQ(r.timings[next].start_ns, 50 * kUs);
  EXPECT_EQ(r.timings[next].end_ns, 120 * kUs);
}

// An op started under the one before it (a forward of 100 us of work and
// 50 of host, then a backward) takes its memory when its work starts, at
// 100 as the forward frees its own: the worker holds at most one of the
// two 1000-byte allocations. The trace draws the backward from 100, its
// start at 50 in args.started_us, so the stream's slices nest.
TEST(DesHostTime, AnOpStartedUnderTheLastTakesItsMemoryAndItsSliceWhenItsWorkStarts) {
  PlanBuilder b("test", 1, 1, 1);
  Op forward = over_layers(compute_op(0, 100e-6), 0, 0);
  forward.alloc_bytes = forward.free_bytes = 1000;
  b.add(forward);
  Op backward = over_layers(compute_op(0, 50e-6, {}, 0, OpKind::kBackward), 0, 0);
  backward.alloc_bytes = backward.free_bytes = 1000;
  const OpId late = b.add(backward);
  Plan plan = std::move(b).build();
  Cluster cluster = simple_cluster(1, 1);
  cluster.device.host_per_op = {{50e-6, 0}, {100e-6, 0}, {}};
  const SimResult r = simulate_plan(plan, cluster, {});
  EXPECT_EQ(r.timings[late].start_ns, 50 * kUs);
  EXPECT_EQ(r.workers.at(0).peak_memory_bytes, plan.workers[0].static_bytes + 1000);
  const nlohmann::json trace = chrome_trace(plan, r);
  bool drawn = false;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "backward") continue;
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 100.0);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 50.0);
    EXPECT_DOUBLE_EQ(e["args"]["started_us"].get<double>(), 50.0);
    drawn = true;
  }
  EXPECT_TRUE(drawn);
}

// Two workers on one GPU, processor sharing; a forward's host time is 300
// us a layer. Worker 0's forward over one layer (100 us of work) and
// worker 1's first op (100 us, no layers: no host time) share the device
// and finish their work at 200 us. Worker 1's second op (100 us; started
// at once, its host part of no time over, its work queued after the
// first's) then has the device alone, since worker 0's op only waits for
// its host: it ends at 300 us, as worker 0's forward does. Were the device
// held until then, it would end at 400 us.
TEST(DesHostTime, AnOpWaitingForItsHostLetsItsSharedDeviceGo) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId forward = b.add(over_layers(compute_op(0, 100e-6), 0, 0));
  const OpId first = b.add(compute_op(1, 100e-6));
  const OpId second = b.add(compute_op(1, 100e-6));
  Cluster cluster = simple_cluster(1, 2);
  cluster.shared_devices = 1;
  cluster.device.host_per_op.forward = {0, 300e-6};
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[first].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[second].start_ns, 0);
  EXPECT_EQ(r.timings[second].end_ns, 300 * kUs);
  EXPECT_EQ(r.timings[forward].end_ns, 300 * kUs);
}

// Another worker's op waits for a compute op's end, the later of its work
// and its host part: here the host part (a backward's 80 us against 30 us
// of work); where the work is the longer, the work (a forward's 90 us
// against 20 us of host), though the worker's own next compute op goes on
// at 20.
TEST(DesHostTime, OtherWorkersWaitForTheLaterPart) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId backward = b.add(over_layers(compute_op(0, 30e-6, {}, 0, OpKind::kBackward), 1, 1));
  const OpId forward = b.add(over_layers(compute_op(0, 90e-6), 1, 1));
  const OpId own = b.add(over_layers(compute_op(0, 10e-6, {}, 0, OpKind::kUpdate), 1, 1));
  const OpId after_backward = b.add(compute_op(1, 10e-6, {backward}));
  const OpId after_forward = b.add(compute_op(1, 10e-6, {forward}));
  Cluster cluster = simple_cluster(1, 2);
  cluster.device.host_per_op = {{20e-6, 0}, {80e-6, 0}, {}};
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[backward].end_ns, 80 * kUs);
  EXPECT_EQ(r.timings[after_backward].start_ns, 80 * kUs);
  EXPECT_EQ(r.timings[forward].end_ns, 170 * kUs);
  EXPECT_EQ(r.timings[own].start_ns, 100 * kUs);
  EXPECT_EQ(r.timings[after_forward].start_ns, 170 * kUs);
}

}  // namespace
}  // namespace trainsim
