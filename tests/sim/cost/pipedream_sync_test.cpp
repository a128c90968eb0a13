// `pipedream-sync`: seed 000's barrier-per-unit PipeDream, two units per
// mini-batch, each as long as the slowest task issued in it.
#include <gtest/gtest.h>

#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::layer;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

Prediction run(const Profile& profile, const Cluster& cluster, const Settings& settings = {}) {
  return testing_fixtures::run_strategy("pipedream-sync", profile, cluster, settings);
}

Cluster latency_free_cluster(int64_t devices) {
  Cluster c = simple_cluster(1, devices);
  c.intra_link.latency_s = 0;
  c.collective.sync_s = 0;  // barriers free too
  return c;
}

TEST(PipedreamSync, MinibatchCostsTwoUnitsOfTheSlowestTask) {
  // Four equal stages of F 1 ms, B 2 ms, no weights, no activations: every unit
  // holds a 2 ms backward, so a mini-batch costs 2 × 2 = 4 ms (docs/equations.md §5),
  // of which each device computes 3 ms and idles 1 ms.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 0, 0), latency_free_cluster(4));
  EXPECT_NEAR(p.iteration_s, 4e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 3e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 1e-3, 1e-12);
  // Stage 0 runs on a version S - 1 = 3 behind, but without weights no
  // gradient is stale.
  EXPECT_EQ(p.staleness, 0);
  EXPECT_EQ(run(chain_profile(4, 1e-3, 2e-3, 1e6, 0), latency_free_cluster(4)).staleness, 3);
}

TEST(PipedreamSync, NeighbouringStagesAlternateForwardAndBackward) {
  // Stage 0: F 1, B 1 ms; stage 1 (last): F 1, B 4 ms. The last stage runs F
  // in the unit where stage 0 runs B (1 ms), and B where stage 0 runs F (4 ms):
  // 5 ms, below docs/equations.md's bound 2·max(F, B) = 8 ms.
  Profile profile = chain_profile(0, 0, 0, 0, 0);
  profile.layers.push_back(layer("a", {"input"}, 1e-3, 1e-3, 0, 0));
  profile.layers.push_back(layer("b", {"a"}, 1e-3, 4e-3, 0, 0));
  const Prediction p = run(profile, latency_free_cluster(2));
  EXPECT_NEAR(p.iteration_s, 5e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-12);
}

TEST(PipedreamSync, TransfersMustLandBeforeTheBarrier) {
  // Two stages of F 2, B 4 ms, update 5 × 2 MB / 100 GB/s = 0.1 ms, 4 MB crossing;
  // one message 4 MB / 10 GB/s + 10 us = 0.41 ms. Unit 1: last stage F (2 ms),
  // stage 0 B + update (4.1 ms). Unit 2: last stage B + update + gradient out
  // (4.51 ms), stage 0 F + activations out (2.41 ms). 4.1 + 4.51 = 8.61 ms,
  // and a barrier after each unit, t_sync = 20 us: 8.65 ms.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 2));
  EXPECT_NEAR(p.iteration_s, 8.65e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 0.04e-3, 1e-12);
  // Without transfers the units are 4.1 + 4.1 ms: 0.41 ms waiting for a transfer;
  // each device computes 6.1 ms and idles 2.1 ms on imbalance.
  EXPECT_NEAR(p.breakdown.idle_transfer_s, 0.41e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 2.1e-3, 1e-12);
  // Weight stashing as in PipeDream: stage 0 keeps one extra version.
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 2e6);
}

TEST(PipedreamSync, IsNeverFasterThanPipedream) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  StrategyConfig config;
  const double pipedream_s = predict_pipedream(profile, cluster, config).iteration_s;
  EXPECT_GT(run(profile, cluster).iteration_s, pipedream_s);
}

}  // namespace
}  // namespace trainsim
