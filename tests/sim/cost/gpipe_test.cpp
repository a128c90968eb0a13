// `gpipe`: forward and backward sweeps of M micro-batches, a flush and one
// update; the bubble matches (K-1)/(M+K-1) (docs/equations.md §5).
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

Prediction run(const Profile& profile, const Cluster& cluster, const Settings& settings = {}) {
  return testing_fixtures::run_strategy("gpipe", profile, cluster, settings);
}

TEST(Gpipe, BubbleFractionMatchesClosedForm) {
  // K = 4 equal stages (F 1, B 2 ms), M = 12, no weights, no bytes, no latency:
  // iteration (M+K-1)·(F+B)/M = 15 × 3 / 12 = 3.75 ms, idle (K-1)/(M+K-1) = 3/15
  // (no barrier cost either).
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "12"}});
  EXPECT_NEAR(p.iteration_s, 3.75e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s / p.iteration_s, 3.0 / 15.0, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 3e-3, 1e-12);
  EXPECT_EQ(p.staleness, 0);
}

TEST(Gpipe, EachHandedOnMicroBatchPacesTheSweepByTheHandoff) {
  // As BubbleFractionMatchesClosedForm with handoff_s = 10 us: the forward
  // sweep's pace is 1/12 ms + 10 us on stages 0-2, the backward's 2/12 ms +
  // 10 us on stages 1-3; the first micro-batch's path is unchanged. Each sweep
  // takes 11 × 10 us longer: 3.75 + 0.22 = 3.97 ms (the plan test times the
  // same case in the simulator).
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  cluster.device.handoff_s = 10e-6;
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "12"}});
  EXPECT_NEAR(p.iteration_s, 3.97e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 3e-3, 1e-12);
}

TEST(Gpipe, MeasuredFixedPartsDoNotShrinkWithTheMicroBatch) {
  // As BubbleFractionMatchesClosedForm, but each layer's forward has a fixed
  // 0.2 ms and its backward 0.4 ms: a micro-batch step is 0.2 + 0.8/12 and
  // 0.4 + 1.6/12 ms, so 0.6 + 2.4/12 = 0.8 ms per forward+backward step and
  // the iteration is (M+K-1) × 0.8 = 15 × 0.8 = 12 ms.
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  for (LayerProfile& l : profile.layers) {
    l.forward_fixed_s = 0.2e-3;
    l.backward_fixed_s = 0.4e-3;
  }
  EXPECT_NEAR(run(profile, cluster, {{"microbatches", "12"}}).iteration_s, 12e-3, 1e-12);
  EXPECT_NEAR(scaled_s(1e-3, 0.2e-3, 1.0 / 12), 0.2e-3 + 0.8e-3 / 12, 1e-15);
}

TEST(Gpipe, SweepsPlusTransfersPlusUpdate) {
  // Two stages of F 2, B 4 ms, 2 MB weights, M = 4: micro-batch steps 0.5 and
  // 1 ms; one hop carries 4 MB / 4 in 1 MB / 10 GB/s + 10 us = 0.11 ms.
  // Forward: 0.5 + 0.11 + 0.5 + 3 × 0.5 = 2.61 ms; backward 1 + 0.11 + 1 + 3 × 1
  // = 5.11 ms; update 5 × 2 MB / 100 GB/s = 0.1 ms; the barrier after the
  // flush, t_sync = 20 us. Total 7.84 ms.
  const Prediction p = run(chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 2), {{"microbatches", "4"}});
  EXPECT_NEAR(p.iteration_s, 7.84e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 0.02e-3, 1e-12);
  // Each device computes 6.1 ms, waits 0.22 ms for the two hops and idles
  // (K-1)·(F+B)/M = 1.5 ms in the bubble.
  EXPECT_NEAR(p.breakdown.compute_s, 6.1e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_transfer_s, 0.22e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 1.5e-3, 1e-12);
  // All four micro-batches' activations: the whole mini-batch, plus what stage 1 received.
  ASSERT_EQ(p.memory.size(), 2u);
  EXPECT_DOUBLE_EQ(p.memory[0].activations_bytes, 8e6);
  EXPECT_DOUBLE_EQ(p.memory[1].activations_bytes, 12e6);
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 0);
}

TEST(Gpipe, ALatencyLongerThanAStageDelaysOnlyTheFirstMicroBatch) {
  // Two stages of F 1, B 2 ms, M = 4, no bytes, a 1 ms latency: a hop is
  // longer than a stage's 0.25 ms forward step, but messages are in flight
  // together (LogP's L), so it paces nothing. Forward: 0.25 + 1 + 0.25 + 3 ×
  // 0.25 = 2.25 ms; backward: 0.5 + 1 + 0.5 + 3 × 0.5 = 3.5 ms. No update, no
  // barrier cost: 5.75 ms (paced by the hop, it would be 9.5 ms).
  Cluster cluster = simple_cluster(1, 2);
  cluster.intra_link.latency_s = 1e-3;
  cluster.collective.sync_s = 0;
  const Prediction p = run(chain_profile(2, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "4"}});
  EXPECT_NEAR(p.iteration_s, 5.75e-3, 1e-12);
}

TEST(Gpipe, DefaultMicrobatchesAreFourPerStage) {
  const Prediction p = run(chain_profile(8, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 4));
  EXPECT_EQ(p.config.at("microbatches"), 16);
  // A batch of 8 samples cannot feed 16 micro-batches: the default stops at 8.
  const Prediction small = run(chain_profile(8, 1e-3, 2e-3, 1e6, 1e6, 8), simple_cluster(1, 4));
  EXPECT_EQ(small.config.at("microbatches"), 8);
}

TEST(Gpipe, MoreMicrobatchesThanSamplesIsAnInputError) {
  EXPECT_THROW(run(chain_profile(4, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 2), {{"microbatches", "33"}}), InputError);
  EXPECT_THROW(run(chain_profile(4, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 2), {{"microbatches", "0"}}), InputError);
}

TEST(Gpipe, MoreMicrobatchesShrinkTheBubble) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  EXPECT_LT(run(profile, cluster, {{"microbatches", "32"}}).iteration_s,
            run(profile, cluster, {{"microbatches", "4"}}).iteration_s);
}

}  // namespace
}  // namespace trainsim
