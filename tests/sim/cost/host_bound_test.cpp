// The analytic method on GPU workers' hosts (docs/equations.md §12), by
// hand: a plan whose compute ops take their kind's host time.
#include "sim/cost/host_bound.hpp"

#include <gtest/gtest.h>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/cost/fixtures.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::predicted;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

Op over_layers(Op op, int32_t first, int32_t last) {
  op.first_layer = first;
  op.last_layer = last;
  return op;
}

// Two iterations. Worker 0 each: a forward, a backward and an update over
// layers 0-2, and a send; worker 1 each: a forward and a recompute of layer
// 0, and a backward over layers 0-1 in iteration 1 alone.
Plan two_workers() {
  PlanBuilder b("test", 2, 2, 64);
  for (int32_t it = 0; it < 2; ++it) {
    b.add(over_layers(compute_op(0, 1e-6, {}, it), 0, 2));
    b.add(over_layers(compute_op(0, 1e-6, {}, it, OpKind::kBackward), 0, 2));
    b.add(over_layers(compute_op(0, 1e-6, {}, it, OpKind::kUpdate), 0, 2));
    b.add(send_op(0, 1, 1e6, {}, it));
    b.add(over_layers(compute_op(1, 1e-6, {}, it), 0, 0));
    b.add(over_layers(compute_op(1, 1e-6, {}, it, OpKind::kRecompute), 0, 0));
  }
  b.add(over_layers(compute_op(1, 1e-6, {}, 1, OpKind::kBackward), 0, 1));
  return std::move(b).build();
}

// Forwards 10 us + 5 us a layer, backwards 20 + 10, updates 30 + 0.
Cluster hosted() {
  Cluster c = simple_cluster(1, 2);
  c.device.host_per_op.forward = {10e-6, 5e-6};
  c.device.host_per_op.backward = {20e-6, 10e-6};
  c.device.host_per_op.update = {30e-6, 0};
  return c;
}

TEST(HostBound, AnIterationTakesAtLeastTheBusiestHostsTimeOnItsComputeOps) {
  // Worker 0: 25 + 50 + 30 = 105 us an iteration (the send takes none);
  // worker 1: (2 · (15 + 15) + 40) / 2 = 50 us.
  Prediction p = predicted(60e-6);
  price_host_per_op(two_workers(), hosted(), p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 105e-6);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 64 / 105e-6);
  EXPECT_DOUBLE_EQ(p.breakdown.compute_s, 105e-6);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("host_per_op"), std::string::npos) << p.notes[0];
}

TEST(HostBound, LeavesAPredictionAboveTheBoundAndDevicesWithoutHostTimes) {
  Prediction p = predicted(200e-6);
  price_host_per_op(two_workers(), hosted(), p);
  EXPECT_EQ(p.iteration_s, 200e-6);
  EXPECT_TRUE(p.notes.empty());
  p = predicted(60e-6);
  price_host_per_op(two_workers(), simple_cluster(1, 2), p);
  EXPECT_EQ(p.iteration_s, 60e-6);
  EXPECT_TRUE(p.notes.empty());
  // Workers sharing a computer's cores (CPU threads): their work is the
  // host's, which the simulator prices by the cores, not per op.
  Cluster threads = hosted();
  threads.shared_cores = 2;
  price_host_per_op(two_workers(), threads, p);
  EXPECT_EQ(p.iteration_s, 60e-6);
  threads.shared_devices = 1;  // virtual workers of one GPU: their hosts priced again
  price_host_per_op(two_workers(), threads, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 105e-6);
}

// The simulator's own pricing takes the same host time per op: one worker
// whose work is negligible next to its host runs an iteration in the bound.
TEST(HostBound, TheSimulatorsIterationMeetsTheBoundWhereTheHostIsTheLonger) {
  PlanBuilder b("test", 1, 4, 64);
  OpId last = -1;
  for (int32_t it = 0; it < 4; ++it) {
    std::vector<OpId> deps;
    if (last >= 0) deps.push_back(last);
    const OpId f = b.add(over_layers(compute_op(0, 1e-6, deps, it), 0, 2));
    const OpId g = b.add(over_layers(compute_op(0, 1e-6, {f}, it, OpKind::kBackward), 0, 2));
    last = b.add(over_layers(compute_op(0, 1e-6, {g}, it, OpKind::kUpdate), 0, 2));
  }
  const Plan plan = std::move(b).build();
  const Cluster c = hosted();
  Prediction p = predicted(3e-6);
  price_host_per_op(plan, c, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 105e-6);
  EXPECT_NEAR(simulate_plan(plan, c, SimOptions{}).iteration_s, 105e-6, 1e-9);
}

}  // namespace
}  // namespace trainsim
