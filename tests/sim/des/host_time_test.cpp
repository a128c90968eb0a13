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
// a backward, 100 us an update: the forward ends at max(50, 70) = 70 us,
// the backward 70 + max(200, 60) = 270, the update 270 + max(10, 100) =
// 370. Without a host time the work alone: 50, 250, 260.
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
    EXPECT_EQ(r.timings[update].end_ns, (priced ? 370 : 260) * kUs);
  }
}

// Two workers on one GPU, processor sharing; a forward's host time is 300
// us a layer. Worker 0's forward over one layer (100 us of work) and
// worker 1's first op (100 us, no layers: no host time) share the device
// and finish their work at 200 us. Worker 1's second op (100 us) then has
// the device alone, since worker 0's op only waits for its host: it ends
// at 300 us, as worker 0's forward does. Were the device held until then,
// it would end at 400 us.
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
  EXPECT_EQ(r.timings[second].start_ns, 200 * kUs);
  EXPECT_EQ(r.timings[second].end_ns, 300 * kUs);
  EXPECT_EQ(r.timings[forward].end_ns, 300 * kUs);
}

// A compute op another worker's op waits on releases it at the later of
// its work and its host part: here the host part (a backward's 80 us
// against 30 us of work).
TEST(DesHostTime, DependentsWaitForTheHostPart) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId backward = b.add(over_layers(compute_op(0, 30e-6, {}, 0, OpKind::kBackward), 1, 1));
  const OpId next = b.add(compute_op(1, 10e-6, {backward}));
  Cluster cluster = simple_cluster(1, 2);
  cluster.device.host_per_op.backward = {80e-6, 0};
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[backward].end_ns, 80 * kUs);
  EXPECT_EQ(r.timings[next].start_ns, 80 * kUs);
}

}  // namespace
}  // namespace trainsim
