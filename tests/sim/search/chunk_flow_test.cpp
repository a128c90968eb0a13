// The cgdp chunking problem's pieces (sim/search/chunk_flow.hpp): the affine
// stages against cgdp_chunk_stage_s, the candidate chunk ends, and the lower
// bound against brute force and a hand-computed case.
#include "sim/search/chunk_flow.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim::chunk_detail {
namespace {

using testing_fixtures::layer;
using testing_fixtures::simple_cluster;

Profile profile_of(const std::vector<std::pair<double, double>>& backward_s_and_bytes) {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  std::string previous = "input";
  for (size_t i = 0; i < backward_s_and_bytes.size(); ++i) {
    const std::string name = "l" + std::to_string(i);
    p.layers.push_back(layer(name, {previous}, 0.1e-3, backward_s_and_bytes[i].first, backward_s_and_bytes[i].second, 1e6));
    previous = name;
  }
  return p;
}

TEST(ChunkFlow, StagesAreTheCostModelsAtAnyByteCount) {
  for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(2, 2)}) {
    const ChunkFlow flow(cluster, 4);
    const std::vector<double> stages = cgdp_chunk_stage_s(3.7e6, cluster, workers_per_machine(cluster, 4));
    ASSERT_EQ(flow.resources, stages.size());
    for (size_t r = 0; r < stages.size(); ++r) EXPECT_NEAR(flow.stage_s(r, 3.7e6), stages[r], 1e-15);
  }
}

TEST(CandidateBoundaries, EndAChunkOnlyBelowAParameterLayerOrAtTheBottom) {
  // Layers 0..4 with parameters on 1 and 3 (n = 5): ends after consuming
  // 5 − 3 = 2 and 5 − 1 = 4 layers from the top, and all 5.
  const Profile p = profile_of({{1e-3, 0}, {1e-3, 1e6}, {1e-3, 0}, {1e-3, 1e6}, {1e-3, 0}});
  EXPECT_EQ(candidate_boundaries(p), (std::vector<int64_t>{2, 4, 5}));
}

TEST(ChunkBoundaries, AreTheChunksAscendingInLayers) {
  // Ends after 2 and 5 layers of 5: layers 3-4 first in backward, then 0-2.
  EXPECT_EQ(chunks_of_boundaries({2, 5}, 5), (std::vector<LayerRange>{{0, 2}, {3, 4}}));
}

TEST(ChunkingLowerBound, IsExactForOneLayerWithParameters) {
  // One layer, backward 1 ms, 1 MB; one machine of 4 (simple_cluster): T =
  // 1 ms + t_as + D2H + 4·1e6/reduce + H2D, exactly the p0 term of the bound.
  const Profile p = profile_of({{1e-3, 1e6}});
  const Cluster cluster = simple_cluster(1, 4);
  const ChunkFlow flow(cluster, 4);
  const double t_s = cgdp_backward_s(p, cluster, 4, {{0, 0}});
  EXPECT_NEAR(chunking_lower_bound_s(flow, p), t_s, 1e-15);
}

TEST(ChunkingLowerBound, IsPureBackwardWithoutParameters) {
  const Profile p = profile_of({{1e-3, 0}, {2e-3, 0}});
  EXPECT_DOUBLE_EQ(chunking_lower_bound_s(ChunkFlow(simple_cluster(1, 4), 4), p), 3e-3);
}

TEST(ChunkingLowerBound, NeverExceedsAnyChunking) {
  // Every chunking of random profiles (up to 10 layers: 512 chunkings each).
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> time_s(0.02e-3, 2e-3);
  std::uniform_real_distribution<double> bytes(1e5, 4e7);
  std::bernoulli_distribution without_params(0.3);
  Cluster slow_sync = simple_cluster(1, 4);
  slow_sync.host.stream_sync_s = 0.5e-3;
  const std::vector<Cluster> clusters = {simple_cluster(1, 4), slow_sync, simple_cluster(2, 2)};
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + trial % 10;
    std::vector<std::pair<double, double>> layers;
    for (int i = 0; i < n; ++i) layers.emplace_back(time_s(rng), without_params(rng) ? 0.0 : bytes(rng));
    const Profile p = profile_of(layers);
    const Cluster& cluster = clusters[static_cast<size_t>(trial) % clusters.size()];
    const double bound_s = chunking_lower_bound_s(ChunkFlow(cluster, 4), p);
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      std::vector<LayerRange> chunks;
      int64_t first = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (i == n - 1 || ((mask >> i) & 1u) != 0) {
          chunks.push_back({first, i});
          first = i + 1;
        }
      }
      ASSERT_LE(bound_s, cgdp_backward_s(p, cluster, 4, chunks) * (1 + 1e-12)) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace trainsim::chunk_detail
