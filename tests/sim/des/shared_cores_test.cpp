// Cores that workers share (Cluster::shared_cores): worker w on core w mod N,
// each core shared equally among its jobs (compute ops, hand-offs, the
// messages its workers receive). Clusters are simple_cluster's round
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
// and 2 share core 0, each at half rate: 2 ms; worker 1 has core 1: 1 ms.
// On three cores (or none shared) each ends at 1 ms.
TEST(DesSharedCores, WorkersOnOneCoreShareItEqually) {
  for (const int64_t cores : {0, 2, 3}) {
    PlanBuilder b("test", 3, 1, 1);
    std::vector<OpId> work;
    for (int32_t w = 0; w < 3; ++w) work.push_back(b.add(compute_op(w, 1e-3)));
    const SimResult r = simulate_built(b, on_cores(3, cores));
    const SimTime shared_end = cores == 2 ? 2000 * kUs : 1000 * kUs;
    EXPECT_EQ(r.timings[work[0]].end_ns, shared_end) << cores << " cores";
    EXPECT_EQ(r.timings[work[1]].end_ns, 1000 * kUs) << cores << " cores";
    EXPECT_EQ(r.timings[work[2]].end_ns, shared_end) << cores << " cores";
  }
}

// One core, 1 ms and 0.5 ms of work: both at half rate until the shorter
// ends at 1 ms; the longer then has 0.5 ms left alone: 1.5 ms.
TEST(DesSharedCores, AnOpSpeedsUpWhenItsCoreMateEnds) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId longer = b.add(compute_op(0, 1e-3));
  const OpId shorter = b.add(compute_op(1, 0.5e-3));
  const SimResult r = simulate_built(b, on_cores(2, 1));
  EXPECT_EQ(r.timings[shorter].end_ns, 1000 * kUs);
  EXPECT_EQ(r.timings[longer].end_ns, 1500 * kUs);
}

// A compute op whose worker's communication changes its rate keeps the
// work it has left. One core, workers 0 and 1 computing 1 ms each from
// t = 0, worker 0 also copying 1e6 B to its host (10 us, then 100 us at
// 10 GB/s): while the copy runs, worker 0's op goes at
// compute_rate_while_communicating (0.5) of its half of the core. By
// 110 us it has done 27.5 us, worker 1's 55 us; then each at half rate,
// worker 1's ends at 110 + 1890 = 2000 us, when worker 0's has done
// 972.5 us; its last 27.5 us alone end at 2027.5 us.
TEST(DesSharedCores, AComputeOpKeepsTheWorkItHasLeftWhenItsRateChanges) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId first = b.add(compute_op(0, 1e-3));
  const OpId copy = b.add(host_op(0, OpKind::kCopyToHost, 1e6));
  const OpId second = b.add(compute_op(1, 1e-3));
  Cluster cluster = on_cores(2, 1);
  cluster.device.compute_rate_while_communicating = 0.5;
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[copy].end_ns, 110 * kUs);
  EXPECT_NEAR(static_cast<double>(r.timings[second].end_ns), 2000.0 * kUs, 2);
  EXPECT_NEAR(static_cast<double>(r.timings[first].end_ns), 2027.5 * kUs, 2);
}

// Worker 1 sends 1e3 B to worker 0 at t = 0 (0.1 us on the link); the
// message's latency (10 us) is its receiver's core work. Worker 2, on
// worker 0's core of two, computes 1 ms from t = 0: the message's 10 us
// take 20 us there, so the receive ends at 20.1 us, and the compute loses
// 10 us: 1010 us. Without shared cores: 10.1 us and 1000 us.
TEST(DesSharedCores, AMessagesLatencyIsItsReceiversCoreWork) {
  for (const int64_t cores : {0, 2}) {
    PlanBuilder b("test", 3, 1, 1);
    const OpId work = b.add(compute_op(2, 1e-3));
    const OpId send = b.add(send_op(1, 0, 1e3));
    const OpId recv = b.add(recv_op(0, 1, send));
    const SimResult r = simulate_built(b, on_cores(3, cores));
    EXPECT_EQ(r.timings[send].end_ns, 100);
    EXPECT_EQ(r.timings[recv].end_ns, cores == 2 ? 20100 : 10100) << cores << " cores";
    EXPECT_EQ(r.timings[work].end_ns, cores == 2 ? 1010 * kUs : 1000 * kUs) << cores << " cores";
  }
}

// Worker 0 computes f (100 us), hands its send to worker 1 over (30 us of
// hand-off) and computes `next` (100 us); worker 2 computes 1 ms on the same
// core (two cores for three workers). f and the other at half rate: f ends
// at 200 us, 100 us of the other done. The hand-off's 30 us beside it end
// at 260 us (130 done); `next` beside it ends at 460 us (230 done); the
// other's last 770 us alone end at 1230 us. The send leaves at 200 us
// (0.1 us on the link) and its 10 us of latency run alone on worker 1's
// core: the receive ends at 210.1 us.
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
  EXPECT_EQ(r.timings[f].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[send].start_ns, 200 * kUs);
  EXPECT_EQ(r.timings[recv].end_ns, 210100);
  EXPECT_EQ(r.timings[next].start_ns, 260 * kUs);
  EXPECT_EQ(r.timings[next].end_ns, 460 * kUs);
  EXPECT_EQ(r.timings[other].end_ns, 1230 * kUs);
}

}  // namespace
}  // namespace trainsim
