// The partition search against hand-computed cases and against brute force
// over every contiguous partition and replica assignment of small profiles.
#include "sim/search/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "model/error.hpp"
#include "sim/cost/stages.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/search/partition_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::layer;
using testing_fixtures::partition_objective_s;
using testing_fixtures::simple_cluster;

// A random DAG of n layers (each reads the previous layer, sometimes also an
// earlier one: a skip edge) with times, weights and activations spread so that
// compute, weight synchronisation and boundaries can each be the bottleneck.
Profile random_profile(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time_s(1e-3, 2e-2), bytes(0.0, 1.2e8), coin(0.0, 1.0);
  Profile p = chain_profile(0, 0, 0, 0, 0);
  for (int l = 0; l < n; ++l) {
    std::vector<std::string> inputs{l == 0 ? "input" : "l" + std::to_string(l - 1)};
    if (l >= 2 && coin(rng) < 0.3) inputs.push_back("l" + std::to_string(l - 2));
    p.layers.push_back(layer("l" + std::to_string(l), inputs, time_s(rng), time_s(rng), bytes(rng), bytes(rng)));
  }
  return p;
}

// Every replica assignment (r_k >= 1, Σ r_k <= workers; all ones unless
// replicate) of `ranges`, keeping the best objective.
void try_replicas(const Profile& profile, const Cluster& cluster, const std::vector<LayerRange>& ranges,
                  std::vector<int64_t>& replicas, int64_t left, bool replicate, PartitionObjective objective,
                  double& best) {
  if (replicas.size() == ranges.size()) {
    best = std::min(best, partition_objective_s(build_pipeline(profile, cluster, ranges, replicas), objective,
                                      profile.batch_size));
    return;
  }
  const int64_t still_needed = static_cast<int64_t>(ranges.size() - replicas.size()) - 1;
  for (int64_t r = 1; r <= (replicate ? left - still_needed : 1); ++r) {
    replicas.push_back(r);
    try_replicas(profile, cluster, ranges, replicas, left - r, replicate, objective, best);
    replicas.pop_back();
  }
}

// Brute force: every set of cuts (a bit mask over the n-1 gaps), every
// replica assignment; stage_count > 0 keeps only partitions of that size.
double brute_force_s(const Profile& profile, const Cluster& cluster, int64_t workers, bool replicate,
                     PartitionObjective objective, int64_t stage_count = 0) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  double best = std::numeric_limits<double>::infinity();
  for (int64_t mask = 0; mask < (int64_t{1} << (n - 1)); ++mask) {
    std::vector<LayerRange> ranges;
    int64_t first = 0;
    for (int64_t gap = 0; gap < n - 1; ++gap) {
      if (mask & (int64_t{1} << gap)) {
        ranges.push_back({first, gap});
        first = gap + 1;
      }
    }
    ranges.push_back({first, n - 1});
    const int64_t k = static_cast<int64_t>(ranges.size());
    if (k > workers || (stage_count > 0 && k != stage_count)) continue;
    std::vector<int64_t> replicas;
    try_replicas(profile, cluster, ranges, replicas, workers, replicate, objective, best);
  }
  return best;
}

// The value the search reports must be the value of the partition it returns.
void expect_consistent(const Profile& profile, const Cluster& cluster, const Partition& found,
                       PartitionObjective objective) {
  std::vector<LayerRange> ranges;
  std::vector<int64_t> replicas;
  for (const PartitionStage& s : found.stages) {
    ranges.push_back(s.layers);
    replicas.push_back(s.replicas);
  }
  const double value =
      partition_objective_s(build_pipeline(profile, cluster, ranges, replicas), objective, profile.batch_size);
  EXPECT_NEAR(found.bottleneck_s, value, 1e-12 * value);
}

void expect_matches_brute_force(PartitionObjective objective, bool replicate, bool straight) {
  std::mt19937 rng(20240601);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial % 8;
    const int64_t workers = 1 + (trial / 8) % 4;
    const Profile profile = random_profile(rng, n);
    const Cluster cluster = simple_cluster(1, workers);
    PartitionOptions options;
    options.objective = objective;
    options.replicate = replicate;
    options.stages = straight ? std::min<int64_t>(n, 1 + trial % workers) : 0;
    const Partition found = search_partition(profile, cluster, options);
    const double expected =
        brute_force_s(profile, cluster, workers, replicate && objective != PartitionObjective::kDsp && !straight,
                      objective, options.stages);
    ASSERT_NEAR(found.bottleneck_s, expected, 1e-9 * expected) << "trial " << trial;
    expect_consistent(profile, cluster, found, objective);
    if (straight) {
      EXPECT_EQ(static_cast<int64_t>(found.stages.size()), options.stages);
    }
  }
}

TEST(PartitionSearch, OneFOneBWithReplicationEqualsBruteForce) {
  expect_matches_brute_force(PartitionObjective::kOneFOneB, true, false);
}

TEST(PartitionSearch, OneFOneBWithoutReplicationEqualsBruteForce) {
  expect_matches_brute_force(PartitionObjective::kOneFOneB, false, false);
}

TEST(PartitionSearch, StraightModeEqualsBruteForceOverExactlyKStages) {
  expect_matches_brute_force(PartitionObjective::kOneFOneB, false, true);
}

// Exactly K unreplicated stages: each level of the recursion computes only
// the band of starts a partition can reach (start_windows), for every schedule.
TEST(PartitionSearch, StraightModeEqualsBruteForceForEverySchedule) {
  for (PartitionObjective objective :
       {PartitionObjective::kDualPipe, PartitionObjective::kGPipe, PartitionObjective::kDsp}) {
    SCOPED_TRACE(static_cast<int>(objective));
    expect_matches_brute_force(objective, false, true);
  }
}

TEST(PartitionSearch, DualPipeEqualsBruteForce) {
  expect_matches_brute_force(PartitionObjective::kDualPipe, true, false);
}

TEST(PartitionSearch, GPipeWithItsBubbleEqualsBruteForce) {
  expect_matches_brute_force(PartitionObjective::kGPipe, true, false);
}

TEST(PartitionSearch, DspWithRecomputeEqualsBruteForce) {
  expect_matches_brute_force(PartitionObjective::kDsp, true, false);
}

TEST(PartitionSearch, ReplicatesOneStageWhenTheBoundaryIsTooSlow) {
  // 4 layers of F 1 ms, B 2 ms, 1 MB weights, 40 MB activations, 2 devices
  // on one machine (10 GB/s, 10 us). Two stages of two layers: each
  // 6 ms + update 5 × 2 MB / 100 GB/s = 6.1 ms, but the cut carries
  // 2·(40 MB / 10 GB/s + 10 us) = 8.02 ms. One stage replicated twice:
  // C = 12 ms + 5 × 4 MB / 100 GB/s = 12.2 ms, W² = 2·1·4 MB / 10 GB/s =
  // 0.8 ms, T = 12.2 / 2 = 6.1 ms (§4).
  const Partition p = search_partition(chain_profile(4, 1e-3, 2e-3, 1e6, 4e7), simple_cluster(1, 2), {});
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].layers, (LayerRange{0, 3}));
  EXPECT_EQ(p.stages[0].replicas, 2);
  EXPECT_NEAR(p.bottleneck_s, 6.1e-3, 1e-12);
}

TEST(PartitionSearch, SplitsWhenWeightSynchronisationForbidsReplication) {
  // Same layers with 1 GB weights each and 4 MB activations: replicating all
  // four layers costs W² = 2·4 GB / 10 GB/s = 0.8 s, far above C. Two stages
  // of two layers: 6 ms + 5 × 2 GB / 100 GB/s = 0.1 s update → 0.106 s each;
  // the cut carries 2·(4 MB / 10 GB/s + 10 us) = 0.82 ms.
  const Partition p = search_partition(chain_profile(4, 1e-3, 2e-3, 1e9, 4e6), simple_cluster(1, 2), {});
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].layers, (LayerRange{0, 1}));
  EXPECT_EQ(p.stages[1].replicas, 1);
  EXPECT_NEAR(p.bottleneck_s, 0.106, 1e-12);
}

TEST(PartitionSearch, RejectsMoreStagesThanLayersNamingTheFlag) {
  PartitionOptions options;
  options.stages = 3;
  try {
    search_partition(chain_profile(2, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4), options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--stages"), std::string::npos);
  }
}

TEST(PartitionSearch, ParsesScheduleNamesAndRejectsOthers) {
  EXPECT_EQ(parse_partition_objective("gpipe", "--schedule"), PartitionObjective::kGPipe);
  EXPECT_THROW(parse_partition_objective("1f1b", "--schedule"), InputError);
}

}  // namespace
}  // namespace trainsim
