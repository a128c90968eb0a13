// `dualpipe`: one unit of forward + backward per mini-batch, then the update;
// SpecTrain's memory and version gaps (seed 000 §3, docs/equations.md §5-6).
#include <gtest/gtest.h>

#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

TEST(Dualpipe, OneUnitOfForwardPlusBackwardThenTheUpdate) {
  // Two stages of F 2, B 4 ms, 2 MB weights (update 5 × 2 MB / 100 GB/s = 0.1 ms),
  // 4 MB crossing: one message 4 MB / 10 GB/s + 10 us = 0.41 ms. Vanilla:
  // stage 0's activations leave after its forward and land at 2.41 ms, inside
  // its 6 ms; stage 1's gradients leave after its backward: 6 + 0.41 = 6.41
  // ms. Then the update phase, 0.1 ms, and the unit's two barriers, t_sync =
  // 20 us each: 6.55 ms.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  const Prediction vanilla = run_strategy("dualpipe", profile, simple_cluster(1, 2), {{"spectrain", "false"}});
  EXPECT_NEAR(vanilla.iteration_s, 6.55e-3, 1e-12);
  EXPECT_NEAR(vanilla.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(vanilla.breakdown.exposed_comm_s, 0.04e-3, 1e-12);
  EXPECT_NEAR(vanilla.breakdown.idle_transfer_s, 0.41e-3, 1e-12);
  EXPECT_NEAR(vanilla.breakdown.idle_imbalance_s, 0, 1e-12);
  // SpecTrain: each prediction and each smoothing of v is 3 of the update's 5
  // passes over the weights: 60 us. Stage 0's forward predicts (s = 2), its backward does not (s =
  // 0): 6.06 ms; stage 1 predicts for both (s = 1): 6.12 + 0.41 = 6.53 ms.
  // Updates 0.16 ms, barriers 0.04: 6.73 ms. Compute averages stage 0's 6.22
  // and stage 1's 6.28 ms; stage 0 waits 0.06 ms more than stage 1.
  const Prediction p = run_strategy("dualpipe", profile, simple_cluster(1, 2));
  EXPECT_NEAR(p.iteration_s, 6.73e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 6.25e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_transfer_s, 0.41e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 0.03e-3, 1e-12);
  // Version gap of the forward on stage 0: 2·2 - 0 - 2 = 2.
  EXPECT_EQ(p.staleness, 2);
  ASSERT_EQ(p.memory.size(), 2u);
  // Stage 0: a mini-batch returns 2 units after its forward, so 3 in flight:
  // 3 × 8 MB activations; weights, gradients, momentum 3 × 2 MB; SpecTrain's
  // smoothed gradient and two predicted weight copies 3 × 2 MB: 36 MB.
  EXPECT_DOUBLE_EQ(p.memory[0].activations_bytes, 24e6);
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 6e6);
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 36e6);
  // Stage 1: one in flight, 8 MB own + 4 MB received activations.
  EXPECT_DOUBLE_EQ(p.memory[1].activations_bytes, 12e6);
}

TEST(Dualpipe, VanillaKeepsNoExtraWeightsAndSkipsThePredictions) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  const Cluster cluster = simple_cluster(1, 2);
  const Prediction spec = run_strategy("dualpipe", profile, cluster);
  const Prediction vanilla = run_strategy("dualpipe", profile, cluster, {{"spectrain", "false"}});
  // Stage 1's two predictions (2 × 60 us) and the smoothing of v (60 us).
  EXPECT_NEAR(spec.iteration_s - vanilla.iteration_s, 0.18e-3, 1e-12);
  EXPECT_DOUBLE_EQ(vanilla.memory[0].stashed_bytes, 0);
  EXPECT_EQ(vanilla.config.at("spectrain"), false);
  EXPECT_EQ(spec.config.at("spectrain"), true);
}

TEST(Dualpipe, SpecTrainPassesRunAtTheRateOfTheMeasuredUpdate) {
  // Measured updates of 0.25 ms per layer: each stage's 0.5 ms, so each
  // prediction or smoothing is 3/5 of it, 0.3 ms (not 60 us at the streaming
  // rate). Stage 1's two predictions lengthen the unit by 0.6 ms (7.01 against
  // 6.41), the smoothing the update phase by 0.3: 0.9 ms over vanilla.
  Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  for (LayerProfile& l : profile.layers) l.update_s = 0.25e-3;
  const Cluster cluster = simple_cluster(1, 2);
  const Prediction spec = run_strategy("dualpipe", profile, cluster);
  const Prediction vanilla = run_strategy("dualpipe", profile, cluster, {{"spectrain", "false"}});
  EXPECT_NEAR(spec.iteration_s - vanilla.iteration_s, 0.9e-3, 1e-12);
}

TEST(Dualpipe, StalenessIsTheLargestSpecTrainVersionGap) {
  // N = 4 GPUs: s = 2N - k - 2 = 6 for the forward on GPU 0, the largest gap.
  const Prediction p = run_strategy("dualpipe", chain_profile(8, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 4));
  EXPECT_EQ(p.staleness, 6);
  bool explained = false;
  for (const std::string& note : p.notes) explained |= note.find("spectrain") != std::string::npos;
  EXPECT_TRUE(explained);
}

TEST(Dualpipe, BeatsPipedreamSyncWhenBackwardIsTwiceForward) {
  // Seed 000's argument: with B = 2F the barrier pipeline spends 2·max(F, B) = 4F
  // per mini-batch, DualPipe F + B = 3F: a 4/3 ratio, less the small update and
  // transfers both pay (0.1 ms update, 0.11 ms messages on 6 ms units).
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  const double dualpipe_s = run_strategy("dualpipe", profile, cluster).iteration_s;
  const double sync_s = run_strategy("pipedream-sync", profile, cluster).iteration_s;
  EXPECT_LT(dualpipe_s, sync_s);
  EXPECT_NEAR(sync_s / dualpipe_s, 4.0 / 3.0, 0.03);
}

}  // namespace
}  // namespace trainsim
