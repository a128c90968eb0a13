// The partition search under a per-device memory limit: against brute force
// over every partition whose memory the schedule's own cost model
// (predict_strategy) keeps within the limit, and hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "model/error.hpp"
#include "sim/cost/stages.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/partition.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/search/partition_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::simple_cluster;

const char* strategy_id(PartitionObjective objective) {
  switch (objective) {
    case PartitionObjective::kOneFOneB: return "pipedream";
    case PartitionObjective::kDualPipe: return "dualpipe";
    case PartitionObjective::kGPipe: return "gpipe";
    case PartitionObjective::kDsp: return "dsp";
  }
  return "";
}

// Per-stage memory of one device of each stage, as the schedule's cost model
// reports it for exactly these stages and replicas.
std::vector<double> model_memory_bytes(const Profile& profile, const Cluster& cluster, PartitionObjective objective,
                                       const std::vector<LayerRange>& ranges, const std::vector<int64_t>& replicas) {
  nlohmann::json stages = nlohmann::json::array(), reps = nlohmann::json::array();
  for (size_t k = 0; k < ranges.size(); ++k) {
    stages.push_back({ranges[k].first, ranges[k].last});
    reps.push_back(replicas[k]);
  }
  StrategyConfig config;
  config.set_json("stages", stages, "test");
  if (objective != PartitionObjective::kDsp) config.set_json("replicas", reps, "test");
  const Prediction p = predict_strategy(find_strategy(strategy_id(objective), "test"), profile, cluster, config);
  std::vector<double> per_stage;
  size_t device = 0;
  for (int64_t r : replicas) {
    per_stage.push_back(p.memory.at(device).total_bytes());
    device += static_cast<size_t>(r);
  }
  return per_stage;
}

// The objective as partition.hpp states it, from the pipeline the cost
// models place.
double objective_s(const Profile& profile, const Cluster& cluster, PartitionObjective objective,
                   const std::vector<LayerRange>& ranges, const std::vector<int64_t>& replicas) {
  return testing_fixtures::partition_objective_s(build_pipeline(profile, cluster, ranges, replicas), objective,
                                                 profile.batch_size);
}

struct BruteForce {
  double best_s = std::numeric_limits<double>::infinity();  // best objective within the limit
  double smallest_peak_bytes = std::numeric_limits<double>::infinity();
};

// Every contiguous partition and replica assignment (Σ r_k <= workers; one
// replica each for DSP or a fixed stage count), keeping the best objective
// among those whose every stage fits `limit_bytes`.
BruteForce brute_force(const Profile& profile, const Cluster& cluster, PartitionObjective objective,
                       int64_t workers, double limit_bytes, int64_t stage_count) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  const bool replicate = objective != PartitionObjective::kDsp && stage_count == 0;
  BruteForce result;
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
    std::vector<int64_t> replicas(static_cast<size_t>(k), 1);
    // Odometer over replica assignments with Σ r <= workers.
    while (true) {
      const std::vector<double> memory = model_memory_bytes(profile, cluster, objective, ranges, replicas);
      const double peak = *std::max_element(memory.begin(), memory.end());
      result.smallest_peak_bytes = std::min(result.smallest_peak_bytes, peak);
      if (peak <= limit_bytes) {
        result.best_s = std::min(result.best_s, objective_s(profile, cluster, objective, ranges, replicas));
      }
      if (!replicate) break;
      int64_t used = 0;
      for (int64_t r : replicas) used += r;
      size_t pos = 0;
      while (pos < replicas.size() && used == workers) {
        used -= replicas[pos] - 1;
        replicas[pos++] = 1;
      }
      if (pos == replicas.size()) break;
      ++replicas[pos];
    }
  }
  return result;
}

// Layers with times, weights, activations and workspaces spread so that
// compute, synchronisation, boundaries and memory can each bind; some skips.
Profile random_profile(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time_s(1e-3, 2e-2), bytes(0.0, 1.2e8), coin(0.0, 1.0);
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  for (int l = 0; l < n; ++l) {
    std::vector<std::string> inputs{l == 0 ? "input" : "l" + std::to_string(l - 1)};
    if (l >= 2 && coin(rng) < 0.3) inputs.push_back("l" + std::to_string(l - 2));
    p.layers.push_back(layer("l" + std::to_string(l), inputs, time_s(rng), time_s(rng), bytes(rng), bytes(rng)));
    if (coin(rng) < 0.5) p.layers.back().workspace_bytes = bytes(rng);
  }
  return p;
}

void expect_matches_brute_force_within_limit(PartitionObjective objective, bool straight) {
  std::mt19937 rng(777 + static_cast<int>(objective));
  std::uniform_real_distribution<double> limit_share(0.3, 1.3);
  int infeasible = 0, feasible = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + trial % 6;
    const int64_t workers = 1 + (trial / 6) % 3;
    const Profile profile = random_profile(rng, n);
    const Cluster cluster = simple_cluster(1, workers);
    const int64_t stage_count = straight ? std::min<int64_t>(n, 1 + trial % workers) : 0;
    const BruteForce unlimited =
        brute_force(profile, cluster, objective, workers, std::numeric_limits<double>::infinity(), stage_count);
    // A limit around the smallest peak any partition reaches: sometimes none fits.
    const double limit_bytes = unlimited.smallest_peak_bytes * limit_share(rng);
    const BruteForce expected = brute_force(profile, cluster, objective, workers, limit_bytes, stage_count);
    PartitionOptions options;
    options.objective = objective;
    options.stages = stage_count;
    options.memory_limit_bytes = limit_bytes;
    if (!std::isfinite(expected.best_s)) {
      ++infeasible;
      EXPECT_THROW(search_partition(profile, cluster, options), InputError) << "trial " << trial;
      continue;
    }
    ++feasible;
    const Partition found = search_partition(profile, cluster, options);
    ASSERT_NEAR(found.bottleneck_s, expected.best_s, 1e-9 * expected.best_s) << "trial " << trial;
    std::vector<LayerRange> ranges;
    std::vector<int64_t> replicas;
    for (const PartitionStage& s : found.stages) {
      ranges.push_back(s.layers);
      replicas.push_back(s.replicas);
    }
    const std::vector<double> memory = model_memory_bytes(profile, cluster, objective, ranges, replicas);
    for (size_t k = 0; k < memory.size(); ++k) {
      EXPECT_NEAR(found.stages[k].memory_bytes, memory[k], 1e-9 * memory[k]) << "trial " << trial << " stage " << k;
      EXPECT_LE(memory[k], limit_bytes * (1 + 1e-12));
    }
  }
  // The limits drawn make both outcomes occur.
  EXPECT_GT(infeasible, 0);
  EXPECT_GT(feasible, 0);
}

TEST(PartitionMemory, OneFOneBWithinTheLimitEqualsBruteForce) {
  expect_matches_brute_force_within_limit(PartitionObjective::kOneFOneB, false);
}

TEST(PartitionMemory, StraightOneFOneBWithinTheLimitEqualsBruteForce) {
  expect_matches_brute_force_within_limit(PartitionObjective::kOneFOneB, true);
}

TEST(PartitionMemory, StraightPipelinesOfEveryScheduleWithinTheLimitEqualBruteForce) {
  for (PartitionObjective objective :
       {PartitionObjective::kDualPipe, PartitionObjective::kGPipe, PartitionObjective::kDsp}) {
    SCOPED_TRACE(static_cast<int>(objective));
    expect_matches_brute_force_within_limit(objective, true);
  }
}

TEST(PartitionMemory, DualPipeWithinTheLimitEqualsBruteForce) {
  expect_matches_brute_force_within_limit(PartitionObjective::kDualPipe, false);
}

TEST(PartitionMemory, GPipeWithinTheLimitEqualsBruteForce) {
  expect_matches_brute_force_within_limit(PartitionObjective::kGPipe, false);
}

TEST(PartitionMemory, DspWithinTheLimitEqualsBruteForce) {
  expect_matches_brute_force_within_limit(PartitionObjective::kDsp, false);
}

// 4 layers of F 1 ms, B 2 ms, 1 MB weights; activations 16, 16, 1, 1 MB.
Profile front_heavy_profile() {
  Profile p = testing_fixtures::chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  p.layers[0].activation_bytes = 16e6;
  p.layers[1].activation_bytes = 16e6;
  return p;
}

TEST(PartitionMemory, StraightPipelineMovesTheCutWhenTheFirstStageWouldStashTooMuch) {
  // Two stages on 2 devices (1F1B, weight stashing: stage 0 keeps 2 batches
  // and 1 stashed version, stage 1 one batch and its 16 MB input).
  // [0-1],[2-3]: stage 0 = 3·2 + 2·32 + 1·2 = 72 MB; 6.1 ms each.
  // [0],[1-3]:   stage 0 = 3·1 + 2·16 + 1 = 36 MB, stage 1 = 3·3 + 18 + 16 = 43 MB;
  //              stage 1 takes 9 ms + update 5 × 3 MB / 100 GB/s = 9.15 ms.
  // [0-2],[3]:   stage 0 = 3·3 + 2·33 + 3 = 78 MB.
  PartitionOptions options;
  options.stages = 2;
  options.memory_limit_bytes = -1;  // none
  const Partition free = search_partition(front_heavy_profile(), simple_cluster(1, 2), options);
  EXPECT_EQ(free.stages[0].layers, (LayerRange{0, 1}));
  EXPECT_NEAR(free.stages[0].memory_bytes, 72e6, 1e-3);
  options.memory_limit_bytes = 50e6;
  const Partition p = search_partition(front_heavy_profile(), simple_cluster(1, 2), options);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].layers, (LayerRange{0, 0}));
  EXPECT_NEAR(p.stages[0].memory_bytes, 36e6, 1e-3);
  EXPECT_NEAR(p.stages[1].memory_bytes, 43e6, 1e-3);
  EXPECT_NEAR(p.bottleneck_s, 9.15e-3, 1e-12);
}

TEST(PartitionMemory, NamesTheFlagAndTheSmallestPeakWhenNothingFits) {
  // As above: the smallest two-stage peak is [0],[1-3]'s 43 MB on stage 1.
  PartitionOptions options;
  options.stages = 2;
  options.memory_limit_bytes = 30e6;
  try {
    search_partition(front_heavy_profile(), simple_cluster(1, 2), options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--memory-limit"), std::string::npos) << what;
    EXPECT_NE(what.find("41.0 MiB"), std::string::npos) << what;  // 43e6 / 2^20 = 41.0
    EXPECT_NE(what.find("stage 1, layers 1-3"), std::string::npos) << what;
  }
}

TEST(PartitionMemory, DefaultLimitIsTheDeviceMemory) {
  // simple_cluster's devices hold 16 GB; 10 layers of 1 GB weights need
  // 3·10 = 30 GB on one device, so a single stage cannot fit and a split must.
  const Profile heavy = testing_fixtures::chain_profile(10, 1e-3, 2e-3, 1e9, 1e6);
  PartitionOptions options;
  options.replicate = false;
  const Partition p = search_partition(heavy, simple_cluster(1, 4), options);
  EXPECT_GT(p.stages.size(), 1u);
  for (const PartitionStage& s : p.stages) EXPECT_LE(s.memory_bytes, 16e9);
  EXPECT_EQ(resolve_memory_limit_bytes(0, simple_cluster(1, 4)), 16e9);
  EXPECT_TRUE(std::isinf(resolve_memory_limit_bytes(-1, simple_cluster(1, 4))));
}

}  // namespace
}  // namespace trainsim
