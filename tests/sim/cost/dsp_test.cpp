// `dsp`: FIFO-decoupled blocks, one forward, recompute and backward per step,
// queue memory and layer-wise staleness (seed 001 §3, docs/equations.md §8).
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

Prediction run(const Profile& profile, const Cluster& cluster, const Settings& settings = {}) {
  return testing_fixtures::run_strategy("dsp", profile, cluster, settings);
}

TEST(Dsp, StepIsForwardRecomputeBackwardAndUpdateOfTheSlowestBlock) {
  // Six layers (F 1, B 2 ms, 1 MB weights, 1 MB activations) on 3 devices:
  // blocks of two layers, F 2, B 4 ms, update 5 × 2 MB / 100 GB/s = 0.1 ms.
  // Default queues DSP(1,1,0;4,2,0): blocks 0 and 1 recompute (2 ms): 8.1 ms a
  // step; block 2 (m = 0) backpropagates what it just forwarded: 6.1 ms. The
  // links need 2·(1 MB / 10 GB/s + 10 us) = 0.22 ms: hidden by the queues.
  const Prediction p = run(chain_profile(6, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3));
  EXPECT_NEAR(p.iteration_s, 8.1e-3, 1e-12);
  EXPECT_EQ(p.workers, 3);
  // Average over the 3 blocks: compute (8.1 + 8.1 + 6.1) / 3, idle (0 + 0 + 2) / 3.
  EXPECT_NEAR(p.breakdown.compute_s, 22.3e-3 / 3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s, 2e-3 / 3, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-12);
  // Layer-wise staleness {4, 2, 0}: the largest is block 0's.
  EXPECT_EQ(p.staleness, 4);
  EXPECT_EQ(p.config.at("queues"), nlohmann::json::parse(R"({"p": [1, 1, 0], "m": [4, 2, 0]})"));
}

TEST(Dsp, QueuesHoldInputsOutputsAndGradients) {
  // Same case. q_k = m_k - m_{k+1} - p_k - 1 = 0 for blocks 0 and 1. Every block
  // holds weights, gradients, momentum 3 × 2 MB and one batch's 2 MB of
  // activations (recomputed for its backward), plus:
  //   block 0: outputs 1 + p = 2 and gradients 1 + q = 1 of 1 MB (its input is
  //            the data, not in the profile): 6 + 2 + 3 = 11 MB;
  //   block 1: inputs 1 + m = 3, outputs 2, gradients 1, of 1 MB: 6 + 2 + 6 = 14 MB;
  //   block 2: one input of 1 MB: 6 + 2 + 1 = 9 MB. No stashed versions.
  const Prediction p = run(chain_profile(6, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3));
  ASSERT_EQ(p.memory.size(), 3u);
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 11e6);
  EXPECT_DOUBLE_EQ(p.memory[1].total_bytes(), 14e6);
  EXPECT_DOUBLE_EQ(p.memory[2].total_bytes(), 9e6);
  EXPECT_DOUBLE_EQ(p.memory[0].stashed_bytes, 0);
}

TEST(Dsp, LongerQueuesRaiseStalenessNotTime) {
  // The paper's DSP(3,3,0;10,5,0): q = 10 - 5 - 3 - 1 = 1 and 5 - 0 - 3 - 1 = 1.
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  const Prediction p = run(profile, simple_cluster(1, 3), {{"queues", R"({"p": [3, 3, 0], "m": [10, 5, 0]})"}});
  EXPECT_EQ(p.staleness, 10);
  EXPECT_NEAR(p.iteration_s, 8.1e-3, 1e-12);
  // Block 1 now queues 1 + 5 inputs, 1 + 3 outputs and 1 + 1 gradients of 1 MB:
  // 6 + 2 + 12 = 20 MB.
  EXPECT_DOUBLE_EQ(p.memory[1].total_bytes(), 20e6);
}

TEST(Dsp, QueuesBreakingTheTimestampOrderAreInputErrors) {
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 3);
  // Δt_0 = 3 < Δt_1 + 2 = 4.
  EXPECT_THROW(run(profile, cluster, {{"queues", R"({"p": [1, 1, 0], "m": [3, 2, 0]})"}}), InputError);
  // p_0 = 3 leaves q_0 = 4 - 2 - 3 - 1 < 0.
  EXPECT_THROW(run(profile, cluster, {{"queues", R"({"p": [3, 1, 0], "m": [4, 2, 0]})"}}), InputError);
  // The last block has no output queue.
  EXPECT_THROW(run(profile, cluster, {{"queues", R"({"p": [1, 1, 1], "m": [4, 2, 0]})"}}), InputError);
  // One entry per block, and only p and m.
  EXPECT_THROW(run(profile, cluster, {{"queues", R"({"p": [1, 0], "m": [2, 0]})"}}), InputError);
  EXPECT_THROW(run(profile, cluster, {{"queues", R"({"p": [1, 1, 0], "m": [4, 2, 0], "q": [0, 0, 0]})"}}), InputError);
  EXPECT_THROW(run(profile, cluster, {{"queues", "4,2,0"}}), InputError);
}

TEST(Dsp, ReplicasAreNotASettingOfDsp) {
  EXPECT_THROW(run(chain_profile(6, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3), {{"replicas", "1,1,1"}}), InputError);
}

}  // namespace
}  // namespace trainsim
