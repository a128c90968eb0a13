// Cores that workers share (Cluster::shared_cores): worker w on core w mod N,
// one worker's compute on a core at a time, the core's jobs (a compute op,
// hand-offs, the messages its workers receive) sharing it equally, and
// the messages' work waiting while compute holds the core. Clusters are simple_cluster's round
// numbers: intra link 10 GB/s (10 B/ns) and 10 us of latency.
#include <gtest/gtest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::host_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simulate_built;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;  // nanoseconds

Cluster on_cores(int64_t workers, int64_t cores) {
  Cluster cluster = simple_cluster(1, workers);
  cluster.shared_cores = cores;
  return cluster;
}

// Three workers, 1 ms of compute each from t = 0. On two cores workers 0
// and 2 share core 0, one at a time (a compute thread keeps its core until
// it blocks): 1 ms and 2 ms; worker 1 has core 1: 1 ms. On three cores (or
// none shared) each ends at 1 ms.
TEST(DesSharedCores, WorkersOnOneCoreComputeOneAtATime) {
  for (const int64_t cores : {0, 2, 3}) {
    PlanBuilder b("test", 3, 1, 1);
    std::vector<OpId> work;
    for (int32_t w = 0; w < 3; ++w) work.push_back(b.add(compute_op(w, 1e-3)));
    const SimResult r = simulate_built(b, on_cores(3, cores));
    EXPECT_EQ(r.timings[work[0]].end_ns, 1000 * kUs) << cores << " cores";
    EXPECT_EQ(r.timings[work[1]].end_ns, 1000 * kUs) << cores << " cores";
    EXPECT_EQ(r.timings[work[2]].start_ns, cores == 2 ? 1000 * kUs : 0) << cores << " cores";
    EXPECT_EQ(r.timings[work[2]].end_ns, cores == 2 ? 2000 * kUs : 1000 * kUs) << cores << " cores";
  }
}

// One core. Worker 0 computes a (1 ms) then b (1 ms), worker 1 c (0.5 ms):
// worker 0's thread runs b right after a, so c waits for both: a 0-1000,
// b 1000-2000, c 2000-2500 us. When a hands worker 0's send over (30 us of
// hand-off), worker 0's thread yields and worker 1's takes the core: c from
// 1000 us beside the hand-off (each at half rate to 1060, then alone) to
// 1530, b after it to 2530; the message (10 us of latency on the one core)
// waits for the compute to block: 2530-2540 us.
TEST(DesSharedCores, AWorkersComputeWaitsUntilTheCoresOwnerBlocksOrYields) {
  for (const bool hands_off : {false, true}) {
    PlanBuilder b("test", 2, 1, 1);
    const OpId a = b.add(compute_op(0, 1e-3));
    OpId recv = -1;
    if (hands_off) recv = b.add(recv_op(1, 0, b.add(send_op(0, 1, 1e3, {a}))));
    const OpId second = b.add(compute_op(0, 1e-3));
    const OpId c = b.add(compute_op(1, 0.5e-3));
    Cluster cluster = on_cores(2, 1);
    cluster.device.handoff_s = hands_off ? 30e-6 : 0.0;
    const SimResult r = simulate_built(b, cluster);
    EXPECT_EQ(r.timings[a].end_ns, 1000 * kUs);
    EXPECT_EQ(r.timings[c].start_ns, hands_off ? 1000 * kUs : 2000 * kUs) << hands_off;
    EXPECT_EQ(r.timings[c].end_ns, hands_off ? 1530 * kUs : 2500 * kUs) << hands_off;
    EXPECT_EQ(r.timings[second].start_ns, hands_off ? 1530 * kUs : 1000 * kUs) << hands_off;
    EXPECT_EQ(r.timings[second].end_ns, hands_off ? 2530 * kUs : 2000 * kUs) << hands_off;
    if (hands_off) {
      EXPECT_EQ(r.timings[recv].end_ns, 2540 * kUs);
    }
  }
}

// A compute op whose worker's communication changes its rate keeps the
// work it has left. One core, workers 0 and 1 computing 1 ms each from
// t = 0, worker 0 also copying 1e6 B to its host (10 us, then 100 us at
// 10 GB/s): worker 0's op has the core and goes at
// compute_rate_while_communicating (0.5) while the copy runs: 55 us done by
// 110 us, its last 945 us at full rate end at 1055 us; worker 1's then
// ends at 2055 us.
TEST(DesSharedCores, AComputeOpKeepsTheWorkItHasLeftWhenItsRateChanges) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId first = b.add(compute_op(0, 1e-3));
  const OpId copy = b.add(host_op(0, OpKind::kCopyToHost, 1e6));
  const OpId second = b.add(compute_op(1, 1e-3));
  Cluster cluster = on_cores(2, 1);
  cluster.device.compute_rate_while_communicating = 0.5;
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[copy].end_ns, 110 * kUs);
  EXPECT_NEAR(static_cast<double>(r.timings[first].end_ns), 1055.0 * kUs, 2);
  EXPECT_NEAR(static_cast<double>(r.timings[second].end_ns), 2055.0 * kUs, 2);
}

// Worker 1 sends 1e3 B to worker 0 at t = 0 (0.1 us on the link); the
// message's latency (10 us) is its receiver's core work, done by a thread
// that polls for it. Worker 2, on worker 0's core of two, computes 1 ms
// from t = 0 and keeps the core until it ends: the receive ends at 1010 us,
// the compute at 1000 us. Without shared cores: 10.1 us and 1000 us.
TEST(DesSharedCores, AMessagesLatencyIsItsReceiversCoreWorkOnceTheComputeThereBlocks) {
  for (const int64_t cores : {0, 2}) {
    PlanBuilder b("test", 3, 1, 1);
    const OpId work = b.add(compute_op(2, 1e-3));
    const OpId send = b.add(send_op(1, 0, 1e3));
    const OpId recv = b.add(recv_op(0, 1, send));
    const SimResult r = simulate_built(b, on_cores(3, cores));
    EXPECT_EQ(r.timings[send].end_ns, 100);
    EXPECT_EQ(r.timings[recv].end_ns, cores == 2 ? 1010 * kUs : 10100) << cores << " cores";
    EXPECT_EQ(r.timings[work].end_ns, 1000 * kUs) << cores << " cores";
  }
}

// Worker 0 computes f (100 us), hands its send to worker 1 over (30 us of
// hand-off) and computes `next` (100 us); worker 2 computes 1 ms on the same
// core (two cores for three workers). f has the core first: 0-100 us. As it
// hands off, worker 0's thread yields: worker 2's op from 100 us, beside
// the hand-off (each at half rate) until 160 us, then alone to 1130 us;
// `next` after it, 1130-1230 us. The send leaves at 100 us (0.1 us on the
// link) and its 10 us of latency run on worker 1's idle core: the receive
// ends at 110.1 us.
TEST(DesSharedCores, AHandoffIsItsWorkersCoreWork) {
  PlanBuilder b("test", 3, 1, 1);
  const OpId f = b.add(compute_op(0, 100e-6));
  const OpId send = b.add(send_op(0, 1, 1e3, {f}));
  const OpId recv = b.add(recv_op(1, 0, send));
  const OpId next = b.add(compute_op(0, 100e-6));
  const OpId other = b.add(compute_op(2, 1e-3));
  Cluster cluster = on_cores(3, 2);
  cluster.device.handoff_s = 30e-6;
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[f].end_ns, 100 * kUs);
  EXPECT_EQ(r.timings[send].start_ns, 100 * kUs);
  EXPECT_EQ(r.timings[recv].end_ns, 110100);
  EXPECT_EQ(r.timings[other].start_ns, 100 * kUs);
  EXPECT_EQ(r.timings[other].end_ns, 1130 * kUs);
  EXPECT_EQ(r.timings[next].start_ns, 1130 * kUs);
  EXPECT_EQ(r.timings[next].end_ns, 1230 * kUs);
}

// A compute thread that hands an op over yields its core, and the threads
// polling there get it. Worker 1 sends 1e3 B to worker 2 at t = 0; worker 0,
// on worker 2's core, computes f (100 us), hands its send to worker 1 over
// (30 us) and computes `next` (100 us). The message's 10 us wait for f's end,
// then run beside the hand-off at half rate: the receive ends at 120 us; the
// hand-off's last 20 us alone end at 140 us, `next` at 240 us.
TEST(DesSharedCores, PollersGetTheCoreWhenItsComputeYields) {
  PlanBuilder b("test", 3, 1, 1);
  const OpId message = b.add(send_op(1, 2, 1e3));
  const OpId received = b.add(recv_op(2, 1, message));
  const OpId f = b.add(compute_op(0, 100e-6));
  b.add(recv_op(1, 0, b.add(send_op(0, 1, 1e3, {f}))));
  const OpId next = b.add(compute_op(0, 100e-6));
  Cluster cluster = on_cores(3, 2);
  cluster.device.handoff_s = 30e-6;
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[received].end_ns, 120 * kUs);
  EXPECT_EQ(r.timings[next].start_ns, 140 * kUs);
  EXPECT_EQ(r.timings[next].end_ns, 240 * kUs);
}

}  // namespace
}  // namespace trainsim
