// dp-ps: gradients summed at a parameter server (device 0 or the host), no
// overlap with backward.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_strategy;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;
using testing_fixtures::two_layer_profile;

// dp-ps on two_layer_profile, with `server` set unless it is empty.
Prediction run(const Cluster& cluster, const std::string& server = "") {
  return run_strategy("dp-ps", two_layer_profile(), cluster,
                      server.empty() ? Settings{} : Settings{{"server", server}});
}

TEST(DpPs, DeviceServerReceivesAndSendsBackOneWorkerAtATime) {
  // two_layer_profile (M = 3 MB, compute 9.15 ms) on 1 × 4, intra α = 1e-5,
  // β = 1e-10, γ = 2e-11. Three peers push one after another: 3·(1e-5 + 3e-4)
  // = 9.3e-4; device 0 adds three vectors: 3·3e6·2e-11 = 1.8e-4; the sum goes
  // back the same way: 9.3e-4. Communication 2.04e-3; t = 11.19e-3.
  const Prediction p = run(simple_cluster(1, 4));
  EXPECT_NEAR(p.iteration_s, 11.19e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 2.04e-3, 1e-12);
  EXPECT_EQ(p.config["server"], "device");
  EXPECT_DOUBLE_EQ(p.samples_per_iteration, 128);
  // Device 0 keeps the three received gradient buffers: 21 MB + 3·3 MB.
  ASSERT_EQ(p.memory.size(), 4u);
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 30e6);
  EXPECT_DOUBLE_EQ(p.memory[1].total_bytes(), 21e6);
}

TEST(DpPs, HostServerCopiesOverEveryDevicesOwnLinkAndSumsOnTheHost) {
  // Host link 10 GB/s, 10 us: each device's copy 1e-5 + 3e6/1e10 = 3.1e-4,
  // all at once; host sums 4·3 MB at 20 GB/s: 6e-4; copy back 3.1e-4.
  // Communication 1.22e-3 (seed 003's T' - T_BP); t = 9.15e-3 + 1.22e-3 = 10.37e-3.
  const Prediction p = run(simple_cluster(1, 4), "host");
  EXPECT_NEAR(p.iteration_s, 10.37e-3, 1e-12);
  // The host holds the buffers: every device a plain replica.
  for (const DeviceMemory& m : p.memory) EXPECT_DOUBLE_EQ(m.total_bytes(), 21e6);
}

TEST(DpPs, HostServerFunnelsOtherMachinesThroughTheNetwork) {
  // 2 × 2: the two devices of machine 1 reach machine 0's host through its
  // network link one after another: 2·(5e-5 + 3e6/1e9) = 6.1e-3 each way.
  // Communication 2·(3.1e-4 + 6.1e-3) + 6e-4 = 13.42e-3; t = 22.57e-3.
  EXPECT_NEAR(run(simple_cluster(2, 2), "host").iteration_s, 22.57e-3, 1e-12);
}

TEST(DpPs, OneWorkerEqualsSingleAndUnknownServerIsAnInputError) {
  EXPECT_DOUBLE_EQ(run(simple_cluster(1, 1)).iteration_s, 9.15e-3);
  EXPECT_DOUBLE_EQ(run(simple_cluster(1, 1), "host").iteration_s, 9.15e-3);
  EXPECT_THROW(run(simple_cluster(1, 4), "gpu0"), InputError);
}

TEST(DpPs, DeviceServerIsSlowerThanTheRingOnEqualLinks) {
  // The server's link carries 2(N-1)M against the ring's 2((N-1)/N)M per link.
  const Prediction ring = run_strategy("dp-ring", two_layer_profile(), simple_cluster(1, 4));
  EXPECT_GT(run(simple_cluster(1, 4)).iteration_s, ring.iteration_s);
}

}  // namespace
}  // namespace trainsim
