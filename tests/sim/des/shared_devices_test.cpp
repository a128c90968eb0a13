// Devices that virtual workers share (Cluster::shared_devices): a machine's
// device d on its physical d mod shared_devices, the compute ops running
// there at once each at shared_device_rate of their count, nothing else on
// it. Clusters are simple_cluster's round numbers.
#include <gtest/gtest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;
using testing_fixtures::simulate_built;

constexpr SimTime kUs = 1000;  // nanoseconds

Cluster on_devices(int64_t machines, int64_t workers_per_machine, int64_t physical, double rate = 0) {
  Cluster cluster = simple_cluster(machines, workers_per_machine);
  cluster.shared_devices = physical;
  cluster.device.compute_rate_while_shared = rate;
  return cluster;
}

// Four workers, 1 ms of compute each from t = 0, on one machine. Each its
// own device: 1 ms. All on one, processor sharing (each at 1/4): 4 ms; at
// a measured rate of 0.4 when all four compute: 2.5 ms; two physical
// devices (workers 0 and 2 on one, 1 and 3 on the other), each at 1/2: 2 ms.
TEST(DesSharedDevices, WorkersComputingAtOnceShareTheirDevice) {
  struct Case {
    int64_t physical;
    double rate;
    SimTime end_ns;
  };
  for (const Case& c :
       {Case{0, 0, 1000 * kUs}, Case{1, 0, 4000 * kUs}, Case{1, 0.4, 2500 * kUs}, Case{2, 0, 2000 * kUs}}) {
    PlanBuilder b("test", 4, 1, 1);
    std::vector<OpId> work;
    for (int32_t w = 0; w < 4; ++w) work.push_back(b.add(compute_op(w, 1e-3)));
    const SimResult r = simulate_built(b, on_devices(1, 4, c.physical, c.rate));
    for (const OpId op : work) {
      EXPECT_EQ(r.timings[op].start_ns, 0) << c.physical << " devices, rate " << c.rate;
      EXPECT_EQ(r.timings[op].end_ns, c.end_ns) << c.physical << " devices, rate " << c.rate;
    }
  }
}

// One device, two workers, processor sharing. Worker 0 computes a (1 ms),
// worker 1 b (0.5 ms) then c (1 ms): b ends at 1000 us (half rate), a has
// done half by then and ends at 2000 us beside c, which has done 0.5 ms by
// then and ends alone at 2500 us. A worker's ops never overlap their
// stream's order; only the count computing at once sets the rate.
TEST(DesSharedDevices, AnOpsEndMovesWhenTheCountComputingChanges) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId a = b.add(compute_op(0, 1e-3));
  const OpId bb = b.add(compute_op(1, 0.5e-3));
  const OpId c = b.add(compute_op(1, 1e-3));
  const SimResult r = simulate_built(b, on_devices(1, 2, 1));
  EXPECT_EQ(r.timings[bb].end_ns, 1000 * kUs);
  EXPECT_EQ(r.timings[c].start_ns, 1000 * kUs);
  EXPECT_EQ(r.timings[a].end_ns, 2000 * kUs);
  EXPECT_EQ(r.timings[c].end_ns, 2500 * kUs);
}

// Virtual workers of one GPU share its host link: two copies of 1 MB to
// the host at once, each at half its 10 B/ns, end at 10 us + 200 us; each
// on a device of its own, at 10 + 100 us. Copies up share the other
// direction alone: one up beside a down is not slowed.
TEST(DesSharedDevices, WorkersOfOneDeviceShareItsHostLink) {
  for (const int64_t physical : {int64_t{0}, int64_t{1}}) {
    PlanBuilder b("test", 2, 1, 1);
    const OpId first = b.add(testing_fixtures::host_op(0, OpKind::kCopyToHost, 1e6));
    const OpId second = b.add(testing_fixtures::host_op(1, OpKind::kCopyToHost, 1e6));
    const OpId up = b.add(testing_fixtures::host_op(0, OpKind::kCopyToDevice, 1e6));
    const SimResult r = simulate_built(b, on_devices(1, 2, physical));
    const SimTime down_ns = physical == 1 ? 210 * kUs : 110 * kUs;
    EXPECT_EQ(r.timings[first].end_ns, down_ns) << physical;
    EXPECT_EQ(r.timings[second].end_ns, down_ns) << physical;
    EXPECT_EQ(r.timings[up].end_ns, 110 * kUs) << physical;
  }
}

// Two machines of two virtual workers, one GPU each: workers 0 and 1 share
// machine 0's, 2 and 3 machine 1's. All compute 1 ms at once: 2 ms, not the
// 4 ms of four workers on one device.
TEST(DesSharedDevices, EachMachineHasItsOwnPhysicalDevices) {
  PlanBuilder b("test", 4, 1, 1);
  std::vector<OpId> work;
  for (int32_t w = 0; w < 4; ++w) work.push_back(b.add(compute_op(w, 1e-3)));
  const SimResult r = simulate_built(b, on_devices(2, 2, 1));
  for (const OpId op : work) EXPECT_EQ(r.timings[op].end_ns, 2000 * kUs);
}

// Messages are not the device's work: worker 1 computes 1 ms while worker
// 0 sends it 10 kB (10 us of latency, 1 us at 10 GB/s) and worker 0 then
// computes 1 ms. The recv ends at 11 us however busy the device; worker
// 0's compute starts after its send and shares the device from then on:
// worker 1's op has 0.989 ms left at half rate until worker 0's ends.
TEST(DesSharedDevices, MessagesBetweenItsWorkersAreNotItsWork) {
  for (const int64_t physical : {0, 1}) {
    PlanBuilder b("test", 2, 1, 1);
    const OpId busy = b.add(compute_op(1, 1e-3));
    const OpId send = b.add(send_op(0, 1, 10e3));
    const OpId recv = b.add(recv_op(1, 0, send));
    const OpId after = b.add(compute_op(0, 1e-3, {send}));
    const SimResult r = simulate_built(b, on_devices(1, 2, physical));
    EXPECT_EQ(r.timings[recv].end_ns, 11 * kUs) << physical;
    EXPECT_EQ(r.timings[after].start_ns, r.timings[send].end_ns) << physical;
    if (physical == 0) {
      EXPECT_EQ(r.timings[busy].end_ns, 1000 * kUs);
      EXPECT_EQ(r.timings[after].end_ns, r.timings[send].end_ns + 1000 * kUs);
    } else {  // both at half rate from the send's end s: worker 1's has 1 ms − s left
      const SimTime s = r.timings[send].end_ns;
      EXPECT_EQ(r.timings[busy].end_ns, s + 2 * (1000 * kUs - s));
      EXPECT_EQ(r.timings[after].end_ns, r.timings[busy].end_ns + (1000 * kUs - (1000 * kUs - s)));
    }
  }
}

}  // namespace
}  // namespace trainsim
