// `1f1b`: one forward, one backward per micro-batch after each stage's
// warm-up, then a flush; GPipe's time on equal stages (docs/equations.md §5)
// with K − k micro-batches' activations on stage k instead of M.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

Prediction run(const std::string& id, const Profile& profile, const Cluster& cluster, const Settings& settings) {
  return testing_fixtures::run_strategy(id, profile, cluster, settings);
}

TEST(OneFOneB, EqualStagesTakeMPlusKMinusOneSteps) {
  // K = 4 equal stages (F 1, B 2 ms a mini-batch), M = 12, nothing else:
  // (M + K − 1)·(F + B)/M = 15 × 3 / 12 = 3.75 ms, idle (K − 1)/(M + K − 1).
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  const Prediction p = run("1f1b", chain_profile(4, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "12"}});
  EXPECT_NEAR(p.iteration_s, 3.75e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.idle_imbalance_s / p.iteration_s, 3.0 / 15.0, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 3e-3, 1e-12);
  EXPECT_EQ(p.staleness, 0);
}

TEST(OneFOneB, TheRoundTripPacesWhatTheWarmUpCannotHide) {
  // Two stages of F 2, B 4 ms, 2 MB weights, M = 4: a micro-batch step is
  // 0.5 + 1 ms on each stage; the hop carries 4 MB / 4 in 1 MB / 10 GB/s +
  // 10 us = 0.11 ms each way. Stage 0 admits one micro-batch before its first
  // backward, so micro-batch j's round trip, 1.5 + 0.11 + 1.5 + 0.11 ms,
  // spans two periods: P = 1.61 ms (stage 1 alone needs 1.5). Path 2 × 1.5 +
  // 2 × 0.11 = 3.22 ms, then 3 periods: 8.05 ms; update 5 × 2 MB / 100 GB/s
  // = 0.1 ms; the barrier 20 us: 8.17 ms, where GPipe's sweeps hide the hops
  // (7.84 ms).
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  const Prediction p = run("1f1b", profile, simple_cluster(1, 2), {{"microbatches", "4"}});
  EXPECT_NEAR(p.iteration_s, 8.17e-3, 1e-12);
  EXPECT_NEAR(run("gpipe", profile, simple_cluster(1, 2), {{"microbatches", "4"}}).iteration_s, 7.84e-3, 1e-12);
}

TEST(OneFOneB, StageKHoldsKMinusKMicroBatchesWhereGpipeHoldsM) {
  // Four stages of one layer, 12 MB of activations a mini-batch, M = 12: the
  // first stage of 1f1b keeps 4 micro-batches' (4/12 of them), GPipe's all
  // 12; the last keeps one micro-batch's activations and received input (12
  // MB each a mini-batch), GPipe's twelve.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 12e6);
  const Prediction one = run("1f1b", profile, simple_cluster(1, 4), {{"microbatches", "12"}});
  const Prediction gpipe = run("gpipe", profile, simple_cluster(1, 4), {{"microbatches", "12"}});
  ASSERT_EQ(one.memory.size(), 4u);
  EXPECT_NEAR(gpipe.memory[0].activations_bytes - one.memory[0].activations_bytes, 12e6 * 8 / 12, 1);
  EXPECT_NEAR(gpipe.memory[3].activations_bytes - one.memory[3].activations_bytes, 2 * 12e6 * 11 / 12, 1);
  // With M = K every stage's warm-up admits what GPipe does at stage 0.
  const Prediction few = run("1f1b", profile, simple_cluster(1, 4), {{"microbatches", "4"}});
  const Prediction gpipe_few = run("gpipe", profile, simple_cluster(1, 4), {{"microbatches", "4"}});
  EXPECT_NEAR(few.memory[0].activations_bytes, gpipe_few.memory[0].activations_bytes, 1);
}

// As the plan test InterleavingShrinksTheBubbleByTheChunks: 6.75 ms with
// two chunks a device, 7.5 ms with one.
TEST(OneFOneB, InterleavedChunksShrinkTheBubble) {
  Cluster cluster = simple_cluster(1, 2);
  cluster.intra_link.latency_s = 0;
  cluster.intra_link.bandwidth_bytes_per_s = 1e18;
  cluster.collective.sync_s = 0;
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  const Prediction two = run("1f1b", profile, cluster, {{"microbatches", "4"}, {"chunks", "2"}});
  EXPECT_NEAR(two.iteration_s, 6.75e-3, 1e-12);
  EXPECT_EQ(two.workers, 2);
  EXPECT_NEAR(run("1f1b", profile, cluster, {{"microbatches", "4"}}).iteration_s, 7.5e-3, 1e-12);
}

// Device 0 of two with two chunks and M = 4 holds its 4 warm-up forwards
// and the next: chunk 0's micro-batches 0, 1, 2 and chunk 1's 0, 1; device
// 1 its 2 and the next: chunk 0's 0, 1 and chunk 1's 0 (each chunk a layer
// of 4 MB a mini-batch, inputs of 4 MB from the chunk before).
TEST(OneFOneB, InterleavedDevicesHoldTheirWarmUpsActivations) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 4e6);
  const Prediction p = run("1f1b", profile, simple_cluster(1, 2), {{"microbatches", "4"}, {"chunks", "2"}});
  ASSERT_EQ(p.memory.size(), 2u);
  // Device 0: stage 0 (no input) 3/4 of 4 MB, stage 2 (4 MB input) 2/4 of 8 MB.
  EXPECT_NEAR(p.memory[0].activations_bytes, 3.0 / 4 * 4e6 + 2.0 / 4 * 8e6, 1);
  // Device 1: stage 1 2/4 of 8 MB, stage 3 1/4 of 8 MB.
  EXPECT_NEAR(p.memory[1].activations_bytes, 2.0 / 4 * 8e6 + 1.0 / 4 * 8e6, 1);
}

TEST(OneFOneB, InterleavingIsRefusedWhereItCannotRun) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 4e6);
  const auto error_of = [&profile](const Settings& settings) -> std::string {
    try {
      run("1f1b", profile, simple_cluster(1, 2), settings);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({{"microbatches", "3"}, {"chunks", "2"}}).find("--set microbatches: 3 with 2 chunks on 2 devices"),
            std::string::npos);
  EXPECT_NE(error_of({{"chunks", "2"}, {"replicas", "1,1"}}).find("--set replicas"), std::string::npos);
  EXPECT_NE(error_of({{"chunks", "2"}, {"stages", "3"}}).find("--set stages: 3 devices of 2 chunks"),
            std::string::npos);
  EXPECT_NE(error_of({{"chunks", "5"}}).find("--set chunks: 5 for 4 layers"), std::string::npos);
}

}  // namespace
}  // namespace trainsim
