// The analytic method on shared devices (docs/equations.md §11), by hand:
// plans of compute ops on workers of one or two physical devices.
#include "sim/cost/shared_devices.hpp"

#include <gtest/gtest.h>

#include "tests/fixtures/profiles.hpp"
#include "tests/sim/cost/fixtures.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::predicted;
using testing_fixtures::simple_cluster;

// Two iterations; each of `workers` workers computes 1 ms per iteration
// (0.6 + 0.4 ms ops), worker 0 another 1 ms in iteration 1.
Plan two_iterations(int32_t workers) {
  PlanBuilder b("test", workers, 2, 64);
  for (int32_t it = 0; it < 2; ++it) {
    for (int32_t w = 0; w < workers; ++w) {
      b.add(compute_op(w, 0.6e-3, {}, it));
      b.add(compute_op(w, 0.4e-3, {}, it, OpKind::kBackward));
    }
  }
  b.add(compute_op(0, 1e-3, {}, 1));
  return std::move(b).build();
}

TEST(SharedDevicesBound, ADevicesWorkersComputeOneAfterAnotherUnderProcessorSharing) {
  Cluster c = simple_cluster(1, 2);
  c.shared_devices = 1;
  // Device 0: (2 × 1 ms + 1 ms) / 2 iterations + 1 ms = 2.5 ms an iteration, at n·r(n) = 1.
  Prediction p = predicted(1.2e-3);
  price_shared_devices(two_iterations(2), c, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 2.5e-3);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 64 / 2.5e-3);
  EXPECT_DOUBLE_EQ(p.breakdown.compute_s, 2.5e-3);
  ASSERT_EQ(p.notes.size(), 1u);
  // r = 0.8 for both at once: n·r = 1.6, 2.5 / 1.6 ms.
  c.device.compute_rate_while_shared = 0.8;
  p = predicted(1.2e-3);
  price_shared_devices(two_iterations(2), c, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 2.5e-3 / 1.6);
}

TEST(SharedDevicesBound, LeavesAPredictionAboveTheBoundAndDevicesNobodyShares) {
  Cluster c = simple_cluster(1, 2);
  Prediction p = predicted(1.2e-3);
  price_shared_devices(two_iterations(2), c, p);  // no shared_devices
  EXPECT_EQ(p.iteration_s, 1.2e-3);
  c.shared_devices = 2;  // each its own: worker 0's 1.5 ms
  price_shared_devices(two_iterations(2), c, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 1.5e-3);
  c.shared_devices = 1;
  p = predicted(3e-3);
  price_shared_devices(two_iterations(2), c, p);
  EXPECT_EQ(p.iteration_s, 3e-3);
  EXPECT_TRUE(p.notes.empty());
}

// Two machines of two workers, a GPU each: workers 0, 1 on machine 0's,
// 2, 3 on machine 1's; machine 0's does 2.5 ms an iteration, machine 1's 2.
TEST(SharedDevicesBound, EachMachinesDeviceBoundsItsOwnWorkers) {
  Cluster c = simple_cluster(2, 2);
  c.shared_devices = 1;
  Prediction p = predicted(1e-3);
  price_shared_devices(two_iterations(4), c, p);
  EXPECT_DOUBLE_EQ(p.iteration_s, 2.5e-3);
}

}  // namespace
}  // namespace trainsim
