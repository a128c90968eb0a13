// `pipedream`: 1F1B steady state at the slowest (replicated) stage or link,
// weight-stashing memory and staleness.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

// Straight pipelines unless a test gives stages or replicas.
Prediction run(const Profile& profile, const Cluster& cluster, Settings settings = {}) {
  const bool given = std::any_of(settings.begin(), settings.end(),
                                 [](const auto& s) { return s.first == "stages" || s.first == "replicas"; });
  if (!given) settings.emplace_back("replicate", "false");
  return testing_fixtures::run_strategy("pipedream", profile, cluster, settings);
}

TEST(Pipedream, OneMinibatchPerSlowestStageWithItsUpdate) {
  // 4 layers of F 1 ms, B 2 ms, 1 MB weights, 4 MB activations on 2 devices:
  // stages 0-1 and 2-3, each F 2 + B 4 ms + update 5 × 2 MB / 100 GB/s = 0.1 ms.
  // The link carries 2·(4 MB / 10 GB/s + 10 us) = 0.82 ms: hidden.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 2));
  EXPECT_NEAR(p.iteration_s, 6.1e-3, 1e-12);
  EXPECT_EQ(p.workers, 2);
  EXPECT_DOUBLE_EQ(p.samples_per_iteration, 32);
  EXPECT_NEAR(p.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 0, 1e-12);
  EXPECT_EQ(p.staleness, 1);
  ASSERT_EQ(p.memory.size(), 2u);
  // Stage 0: 2 mini-batches in flight: weights, gradients, momentum 3 × 2 MB,
  // activations 2 × (4 + 4) MB, one stashed version of 2 MB: 24 MB.
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 24e6);
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 2e6);
  // Stage 1: one in flight: 6 MB + its activations 8 MB + the 4 MB it received.
  EXPECT_DOUBLE_EQ(p.memory[1].total_bytes(), 18e6);
  EXPECT_DOUBLE_EQ(p.memory[1].stashed_bytes, 0);
  ASSERT_FALSE(p.notes.empty());  // the default partition is explained
}

TEST(Pipedream, BreakdownSumsToIterationWithImbalance) {
  // Stages 0-0 and 1-3: 3 ms + 0.05 ms update against 9 ms + 0.15 ms.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 2), {{"stages", "0-0,1-3"}});
  EXPECT_NEAR(p.iteration_s, 9.15e-3, 1e-12);
  // Average over 2 devices: compute (3.05 + 9.15) / 2, idle (6.1 + 0) / 2.
  EXPECT_NEAR(p.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 3.05e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-12);
}

TEST(Pipedream, SlowLinkSetsThePaceAndOthersWaitForIt) {
  // One device per machine: the boundary takes 2·(4 MB / 1 GB/s + 50 us) = 8.1 ms
  // per mini-batch, slower than each stage's 6.1 ms.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(2, 1));
  EXPECT_NEAR(p.iteration_s, 8.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_transfer_s, 2e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-12);
}

TEST(Pipedream, ReplicatedStageFollowsPipeDreamFormula) {
  // 3 layers, stages 0-1 (2 replicas) and 2-2. Stage 0: F+B 6 ms + update
  // 5 × 2 MB / 100 GB/s = 0.1 ms; W^2 = 2·1·2 MB / 10 GB/s = 0.4 ms is hidden:
  // T = 6.1 / 2 = 3.05 ms. Stage 1: 3 ms + 0.05 ms = 3.05 ms.
  const Prediction p =
      run(chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3), {{"stages", "0-1,2-2"}, {"replicas", "2,1"}});
  EXPECT_NEAR(p.iteration_s, 3.05e-3, 1e-12);
  EXPECT_EQ(p.workers, 3);
  ASSERT_EQ(p.memory.size(), 3u);
  // NOAM = ⌈3 workers / 2 replicas⌉ = 2: one stashed version on the input stage.
  EXPECT_EQ(p.staleness, 1);
  EXPECT_DOUBLE_EQ(p.memory[1].stashed_bytes, 2e6);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-12);
}

TEST(Pipedream, ExposedWeightSyncIsCommunication) {
  // As above with 100 MB per layer: stage 0 computes 6 ms + 5 × 200 MB / 100 GB/s
  // = 16 ms but W^2 = 2·200 MB / 10 GB/s = 40 ms: T = 40 / 2 = 20 ms. Stage 1:
  // 3 ms + 5 ms = 8 ms. Stage-0 devices: compute 8 ms, exposed sync 12 ms;
  // stage-1 device: compute 8 ms, idle 12 ms.
  const Prediction p =
      run(chain_profile(3, 1e-3, 2e-3, 1e8, 1e6), simple_cluster(1, 3), {{"stages", "0-1,2-2"}, {"replicas", "2,1"}});
  EXPECT_NEAR(p.iteration_s, 20e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 8e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 2.0 / 3.0 * 12e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 1.0 / 3.0 * 12e-3, 1e-12);
}

TEST(Pipedream, InputStageLagsStagesMinusOne) {
  // Four stages: stage k keeps 4 - k mini-batches and 3 - k stashed versions.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 4));
  EXPECT_EQ(p.staleness, 3);
  ASSERT_EQ(p.memory.size(), 4u);
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 3e6);
  EXPECT_DOUBLE_EQ(p.memory[3].stashed_bytes, 0);
  // Stage 0: 4 × 1 MB activations; stage 3: 1 × (1 MB own + 1 MB received).
  EXPECT_DOUBLE_EQ(p.memory[0].activations_bytes, 4e6);
  EXPECT_DOUBLE_EQ(p.memory[3].activations_bytes, 2e6);
}

TEST(Pipedream, OneStageIsSingle) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 1);
  StrategyConfig single_config;
  EXPECT_NEAR(run(profile, cluster).iteration_s, predict_single(profile, cluster, single_config).iteration_s, 1e-15);
}

}  // namespace
}  // namespace trainsim
