// cgdp: chunks of gradients summed on the host during backward (seed 003).
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/chunk.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

// l0 (4 MB of parameters), relu (none), l2 (8 MB); forward and backward 1 ms
// each. Σfw = Σbw = 3 ms; update of 12 MB: 5·12e6/1e11 = 0.6 ms.
Profile three_layers() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("l0", {"input"}, 1e-3, 1e-3, 4e6, 1e6));
  p.layers.push_back(layer("relu", {"l0"}, 1e-3, 1e-3, 0, 1e6));
  p.layers.push_back(layer("l2", {"relu"}, 1e-3, 1e-3, 8e6, 1e6));
  return p;
}

TEST(Cgdp, HandComputedThreeLayerCase) {
  // One machine of 4: host link 10 GB/s and 10 us, host sum 20 GB/s, stream
  // sync 20 us. chunk_size 1 gives chunks {l2} and {l0 with the relu above it}.
  // {l2}: backward 1 ms + sync → ready 1.02 ms; D2H 1e-5 + 8e6/1e10 = 0.81 ms →
  //   1.83; host sum 4·8e6/2e10 = 1.6 ms → 3.43; H2D 0.81 ms → 4.24 ms.
  // {relu, l0}: backward 2 ms more → 3.02, + sync → ready 3.04 ms; D2H 0.41 ms →
  //   3.45; sum 4·4e6/2e10 = 0.8 ms, starts 3.45 (after 3.43) → 4.25; H2D
  //   starts 4.25 (after 4.24), 0.41 ms → 4.66 ms.
  // T = max(3.04, 4.66) = 4.66 ms; t = 3 + 4.66 + 0.6 = 8.26 ms.
  const Prediction p = run_strategy("cgdp", three_layers(), simple_cluster(1, 4), {{"chunk_size", "1"}});
  EXPECT_NEAR(p.iteration_s, 8.26e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 6.6e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 4.66e-3 - 3e-3, 1e-12);
  EXPECT_EQ(p.config["chunk_size"], 1);
  EXPECT_EQ(p.config["chunks"], nlohmann::json::parse("[[0,1],[2,2]]"));
  ASSERT_FALSE(p.notes.empty());
  EXPECT_EQ(p.notes[0], "chunks 0-1,2-2 (chunk_size 1)");
  EXPECT_DOUBLE_EQ(p.samples_per_iteration, 4 * 32);
}

TEST(Cgdp, DefaultChunkingIsTheExactOptimum) {
  // The other chunkings of three_layers() (HandComputedThreeLayerCase's
  // numbers): one chunk 0-2: ready 3.02, D2H 1.21 → 4.23, sum 2.4 → 6.63,
  // H2D → 7.84 ms; {0-0, 1-2}: l2's chunk ready 2.02 → 2.83 → 4.43 → 5.24,
  // l0's ready 3.04 → 3.45, sum waits to 4.43 → 5.23, H2D waits to 5.24 →
  // 5.65 ms. So 0-1,2-2 (4.66 ms) is the optimum, and the default takes it.
  const Cluster cluster = simple_cluster(1, 4);
  const Prediction p = run_strategy("cgdp", three_layers(), cluster);
  EXPECT_NEAR(p.iteration_s, 8.26e-3, 1e-12);
  EXPECT_EQ(p.config["chunks"], nlohmann::json::parse("[[0,1],[2,2]]"));
  EXPECT_FALSE(p.config.contains("chunk_size"));
  ASSERT_FALSE(p.notes.empty());
  EXPECT_EQ(p.notes[0], "chunks 0-1,2-2 (exact optimum)");
  const Chunking exact = exact_cgdp_chunking(three_layers(), cluster, 4).value();
  EXPECT_NEAR(exact.backward_s, 4.66e-3, 1e-12);
}

TEST(Cgdp, OneChunkOfEverythingIsTheNonOverlappedSum) {
  // Backward 3 ms + one sync 0.02 ms; D2H 1e-5 + 12e6/1e10 = 1.21 ms; host sum
  // 4·12e6/2e10 = 2.4 ms; H2D 1.21 ms. T = 3.02 + 1.21 + 2.4 + 1.21 = 7.84 ms;
  // t = 3 + 7.84 + 0.6 = 11.44 ms.
  const Prediction p = run_strategy("cgdp", three_layers(), simple_cluster(1, 4), {{"chunks", "0-2"}});
  EXPECT_NEAR(p.iteration_s, 11.44e-3, 1e-12);
  // That is dp-ps with the host as server (seed 003's typical data parallel,
  // T' = T_BP + t_aa + t_bc) plus the one stream synchronization.
  const Prediction ps = run_strategy("dp-ps", three_layers(), simple_cluster(1, 4), {{"server", "host"}});
  EXPECT_NEAR(p.iteration_s - ps.iteration_s, 20e-6, 1e-12);
}

TEST(Cgdp, PerLayerChunksPayOneStreamSyncPerLayer) {
  // 10 layers, 1 ms backward and 1 kB of parameters each: transfers are
  // negligible and never queue, so T = Σbw + (syncs)·20 us + the last chunk's
  // D2H (1e-5 + 1e3/1e10) + sum (4e3/2e10) + H2D (1e-5 + 1e3/1e10)
  //   = 10 ms + 10·0.02 ms + 2.04e-5 s = 10.2204 ms with one chunk per layer;
  // t = Σfw 10 ms + T + update 5·1e4/1e11 = 20.2209 ms.
  const Profile flat = testing_fixtures::chain_profile(10, 1e-3, 1e-3, 1e3, 1e3);
  const Prediction per_layer = run_strategy("cgdp", flat, simple_cluster(1, 4), {{"chunk_size", "1"}});
  EXPECT_NEAR(per_layer.iteration_s, 20.2209e-3, 1e-12);
  // chunk_size 5 (seed 003 §4.2): one chunk of layers 9-5, then 4, 3, 2, 1, 0
  // alone: 6 syncs, 4 fewer: 0.08 ms faster. The U-shape's left side.
  const Prediction fives = run_strategy("cgdp", flat, simple_cluster(1, 4), {{"chunk_size", "5"}});
  EXPECT_EQ(fives.notes[0], "chunks 0-0,1-1,2-2,3-3,4-4,5-9 (chunk_size 5)");
  EXPECT_NEAR(per_layer.iteration_s - fives.iteration_s, 4 * 20e-6, 1e-12);
}

TEST(Cgdp, NeverFasterThanComputeAlone) {
  const Profile flat = testing_fixtures::chain_profile(12, 1e-3, 2e-3, 4e6, 1e6);
  const double compute_s = run_strategy("single", flat, simple_cluster(1, 4)).iteration_s;
  for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(2, 2)}) {
    for (int chunk_size = 1; chunk_size <= 12; ++chunk_size) {
      EXPECT_GE(run_strategy("cgdp", flat, cluster, {{"chunk_size", std::to_string(chunk_size)}}).iteration_s,
                compute_s)
          << "chunk_size " << chunk_size;
    }
  }
}

TEST(Cgdp, OneWorkerEqualsSingle) {
  // Seed 003 Table 2: 1-GPU CGDP runs as fast as 1-GPU Caffe.
  EXPECT_DOUBLE_EQ(run_strategy("cgdp", three_layers(), simple_cluster(1, 4), {{"workers", "1"}}).iteration_s,
                   run_strategy("single", three_layers(), simple_cluster(1, 4)).iteration_s);
}

TEST(Cgdp, AcrossMachinesHostsAllReduceEachChunk) {
  // 2 × 2, one chunk of everything: D2H 1.21 ms, host sum of the machine's 2
  // copies 2·12e6/2e10 = 1.2 ms, ring AllReduce of 12 MB between the 2 hosts
  // (α = 5e-5, β = 1e-9, γ = 1/2e10): 2·5e-5 + 12e6·1e-9 + 0.5·12e6·5e-11
  // = 1e-4 + 1.2e-2 + 3e-4 = 12.4 ms; H2D 1.21 ms.
  // T = 3.02 + 1.21 + 1.2 + 12.4 + 1.21 = 19.04 ms; t = 3 + 19.04 + 0.6 = 22.64 ms.
  EXPECT_NEAR(run_strategy("cgdp", three_layers(), simple_cluster(2, 2), {{"chunks", "0-2"}}).iteration_s, 22.64e-3,
              1e-12);
}

TEST(Cgdp, BadChunkSettingsAreInputErrors) {
  const Profile profile = three_layers();
  const Cluster cluster = simple_cluster(1, 4);
  EXPECT_THROW(run_strategy("cgdp", profile, cluster, {{"chunks", "0-2"}, {"chunk_size", "1"}}), InputError);
  EXPECT_THROW(run_strategy("cgdp", profile, cluster, {{"chunks", "0-1"}}), InputError);
  EXPECT_THROW(run_strategy("cgdp", profile, cluster, {{"chunk_size", "3"}}), InputError);  // 2 layers have parameters
  EXPECT_THROW(run_strategy("cgdp", profile, cluster, {{"chunk_size", "0"}}), InputError);
}

}  // namespace
}  // namespace trainsim
