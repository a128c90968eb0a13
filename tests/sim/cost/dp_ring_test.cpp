// dp-ring: forward, backward, one AllReduce of every gradient, update.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;
using testing_fixtures::two_layer_profile;

Prediction run(const Profile& profile, const Cluster& cluster, const Settings& settings = {}) {
  return testing_fixtures::run_strategy("dp-ring", profile, cluster, settings);
}

TEST(DpRing, ASparseLayerExchangedDenseIsUpdatedDense) {
  // Layer 0 sparse (an embedding of 1 MB) with a measured sparse step of 10 us,
  // layer 1 dense with a measured 20 us. One worker steps the touched rows:
  // 30 us. Two or more AllReduce the table's gradient as a dense 1 MB vector,
  // so its step passes over all of it, 5 · 1e6 / 1e11 = 50 us: 70 us, and
  // the prediction is 40 us longer.
  Profile profile = two_layer_profile();
  profile.layers[0].sparse = true;
  profile.layers[0].sparsity = 0.01;
  profile.layers[0].param_bytes = 1e6;
  profile.layers[0].update_s = 10e-6;
  profile.layers[1].update_s = 20e-6;
  const Cluster cluster = simple_cluster(1, 4);
  EXPECT_NEAR(exchanged_update_s(profile, cluster, 1), 30e-6, 1e-15);
  EXPECT_NEAR(exchanged_update_s(profile, cluster, 2), 70e-6, 1e-15);
  Profile dense = profile;
  dense.layers[0].sparse = false;
  dense.layers[0].sparsity = 1;
  EXPECT_NEAR(run(profile, cluster).iteration_s - run(dense, cluster).iteration_s, 40e-6, 1e-12);
}

TEST(DpRing, AddsOneRingAllReduceAfterBackward) {
  // two_layer_profile on one machine of 4: Σfw 3 ms, Σbw 6 ms, M = 3 MB,
  // update 5·3e6/1e11 = 0.15 ms. Intra link α = 1e-5, β = 1e-10, γ = 1/50e9 = 2e-11.
  // ring = 2·3·1e-5 + 2·(3/4)·3e6·1e-10 + (3/4)·3e6·2e-11
  //      = 6e-5 + 4.5e-4 + 4.5e-5 = 5.55e-4; + t_sync 2e-5 = 5.75e-4.
  // t = 3e-3 + 6e-3 + 0.15e-3 + 0.575e-3 = 9.725e-3.
  const Prediction p = run(two_layer_profile(), simple_cluster(1, 4));
  EXPECT_NEAR(p.iteration_s, 9.725e-3, 1e-12);
  EXPECT_EQ(p.workers, 4);
  EXPECT_DOUBLE_EQ(p.samples_per_iteration, 4 * 32);
  EXPECT_NEAR(p.breakdown.compute_s, 9.15e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 5.75e-4, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-15);
  ASSERT_EQ(p.memory.size(), 4u);
  // Every worker a full replica: 3 × 3 MB of weights, gradients, momentum + 12 MB activations.
  for (const DeviceMemory& m : p.memory) EXPECT_DOUBLE_EQ(m.total_bytes(), 21e6);
  EXPECT_EQ(p.staleness, 0);
  EXPECT_EQ(p.config["workers"], 4);
  EXPECT_EQ(p.config["algorithm"], "ring");
}

TEST(DpRing, PackingForTheAllReduceAddsBytesOverTheMeasuredRate) {
  // As AddsOneRingAllReduceAfterBackward, on a cluster that packs at 10 GB/s:
  // 3 MB / 1e10 = 0.3 ms more, 9.725 + 0.3 = 10.025 ms.
  Cluster cluster = simple_cluster(1, 4);
  cluster.collective.pack_bytes_per_s = 10e9;
  const Prediction p = run(two_layer_profile(), cluster);
  EXPECT_NEAR(p.iteration_s, 10.025e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 8.75e-4, 1e-12);
}

TEST(DpRing, GroupAcrossMachinesUsesTheSlowerLink) {
  // 2 machines × 2 devices, N = 4 crosses machines: α = 5e-5, β = 1e-9.
  // ring = 6·5e-5 + 1.5·3e6·1e-9 + 0.75·3e6·2e-11 = 3e-4 + 4.5e-3 + 4.5e-5 = 4.845e-3;
  // + 2e-5 sync = 4.865e-3; t = 9.15e-3 + 4.865e-3 = 14.015e-3.
  const Prediction p = run(two_layer_profile(), simple_cluster(2, 2));
  EXPECT_NEAR(p.iteration_s, 14.015e-3, 1e-12);
  // Two workers fit on one machine: the intra link again.
  // ring = 2·1e-5 + 2·(1/2)·3e6·1e-10 + (1/2)·3e6·2e-11 = 2e-5 + 3e-4 + 3e-5 = 3.5e-4;
  // t = 9.15e-3 + 3.5e-4 + 2e-5 = 9.52e-3.
  EXPECT_NEAR(run(two_layer_profile(), simple_cluster(2, 2), {{"workers", "2"}}).iteration_s, 9.52e-3, 1e-12);
}

TEST(DpRing, OneWorkerEqualsSingle) {
  const Prediction p = run(two_layer_profile(), simple_cluster(1, 4), {{"workers", "1"}});
  const Prediction single = run(two_layer_profile(), simple_cluster(1, 1));  // N = 1 by default too
  EXPECT_DOUBLE_EQ(p.iteration_s, 9.15e-3);
  EXPECT_DOUBLE_EQ(single.iteration_s, 9.15e-3);
  EXPECT_EQ(p.breakdown.exposed_comm_s, 0.0);
}

TEST(DpRing, AlgorithmKeyPicksAnotherAllReduce) {
  // Recursive doubling, N = 4: lg 4 = 2 rounds of α + Mβ + Mγ
  // = 2·(1e-5 + 3e-4 + 6e-5) = 7.4e-4; t = 9.15e-3 + 7.4e-4 + 2e-5 = 9.91e-3.
  EXPECT_NEAR(run(two_layer_profile(), simple_cluster(1, 4), {{"algorithm", "recursive-doubling"}}).iteration_s,
              9.91e-3, 1e-12);
  EXPECT_THROW(run(two_layer_profile(), simple_cluster(1, 4), {{"algorithm", "butterfly"}}), InputError);
}

TEST(DpRing, TooManyWorkersIsAnInputError) {
  EXPECT_THROW(run(two_layer_profile(), simple_cluster(1, 4), {{"workers", "5"}}), InputError);
}

}  // namespace
}  // namespace trainsim
