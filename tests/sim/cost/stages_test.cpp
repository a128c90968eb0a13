// Stage partitions: resolution from the settings, the exact balanced default
// (against brute force), placement on machines, boundary bytes on a DAG and
// the replicated-stage formula of docs/equations.md §4.
#include "sim/cost/stages.hpp"
#include "sim/search/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "model/error.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::layer;
using testing_fixtures::simple_cluster;

// Straight pipelines searched under the 1F1B objective.
constexpr PartitionDefaults kStraight{PartitionObjective::kOneFOneB, false};

// Largest Σ(F+B)/r over the stages of `ranges`.
double largest_stage_s(const Profile& profile, const std::vector<LayerRange>& ranges,
                       const std::vector<int64_t>& replicas) {
  double largest = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    double sum = 0;
    for (int64_t l = ranges[k].first; l <= ranges[k].last; ++l) {
      sum += profile.layers[l].forward_s + profile.layers[l].backward_s;
    }
    largest = std::max(largest, sum / static_cast<double>(replicas[k]));
  }
  return largest;
}

// Every way to cut `layers` layers into `stages` non-empty contiguous stages.
double brute_force_best_s(const Profile& profile, int64_t stages, const std::vector<int64_t>& replicas) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<LayerRange> ranges;
  std::function<void(int64_t)> extend = [&](int64_t first) {
    if (static_cast<int64_t>(ranges.size()) == stages - 1) {
      ranges.push_back({first, n - 1});
      best = std::min(best, largest_stage_s(profile, ranges, replicas));
      ranges.pop_back();
      return;
    }
    const int64_t left_after = stages - 1 - static_cast<int64_t>(ranges.size());
    for (int64_t last = first; last <= n - 1 - left_after; ++last) {
      ranges.push_back({first, last});
      extend(last + 1);
      ranges.pop_back();
    }
  };
  extend(0);
  return best;
}

Profile irregular_profile() {
  // Eight layers with uneven times (ms): F+B = 3, 9, 1, 4, 12, 2, 7, 5.
  const double fb_ms[] = {3, 9, 1, 4, 12, 2, 7, 5};
  Profile p = chain_profile(8, 0, 0, 1e6, 1e6);
  for (size_t l = 0; l < 8; ++l) {
    p.layers[l].forward_s = fb_ms[l] * 1e-3 / 3;
    p.layers[l].backward_s = fb_ms[l] * 2e-3 / 3;
  }
  return p;
}

TEST(Stages, ReplicatingDefaultTakesTheSearchsStagesAndReplicas) {
  // With `replicate` and no stages given, the pipeline is exactly the
  // replicating search's optimum, recorded as stages and replicas.
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  StrategyConfig config;
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kPipedreamPartition);
  PartitionOptions options;
  const Partition best = search_partition(profile, cluster, options);
  ASSERT_EQ(pipe.stage_count(), static_cast<int64_t>(best.stages.size()));
  for (size_t k = 0; k < best.stages.size(); ++k) {
    EXPECT_EQ(pipe.stages[k].layers, best.stages[k].layers);
    EXPECT_EQ(pipe.stages[k].replicas, best.stages[k].replicas);
  }
  EXPECT_EQ(config.resolved().at("replicas").size(), best.stages.size());
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("with replication"), std::string::npos);
}

TEST(Stages, ReplicatingDefaultReplicatesAComputeHeavyStage) {
  // Layer 0 takes 30 ms (F 10, B 20) and the other three 3 ms each. Straight
  // on 4 devices, layer 0 alone bounds the pipeline at 30 ms; any partition
  // giving it two or more replicas does better, so the search replicates it.
  Profile profile = chain_profile(4, 1e-3, 2e-3, 1e7, 1e3);
  profile.layers[0].forward_s = 10e-3;
  profile.layers[0].backward_s = 20e-3;
  const Cluster cluster = simple_cluster(1, 4);
  StrategyConfig config;
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kPipedreamPartition);
  EXPECT_GE(pipe.stages[0].replicas, 2);
  EXPECT_LT(testing_fixtures::run_strategy("pipedream", profile, cluster).iteration_s,
            testing_fixtures::run_strategy("pipedream", profile, cluster, {{"replicate", "false"}}).iteration_s);
}

TEST(Stages, ReplicateBesideOnlyOneOfStagesAndReplicasIsAnInputError) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  StrategyConfig config;
  config.set("stages", "0-3,4-7", "--set stages");
  config.set("replicate", "true", "--set replicate");
  std::vector<std::string> notes;
  try {
    resolve_pipeline(profile, simple_cluster(1, 4), config, notes, kPipedreamPartition);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--set replicate");
  }
  // Without the explicit key, the given stages simply win over the default.
  StrategyConfig given;
  given.set("stages", "0-3,4-7", "--set stages");
  EXPECT_EQ(resolve_pipeline(profile, simple_cluster(1, 4), given, notes, kPipedreamPartition).stage_count(), 2);
}

TEST(Stages, ReplicateBesideAWholePartitionTakesItAsTheSearchResolvedIt) {
  // A searched run's settings (replicate, stages and replicas) set again give
  // the same pipeline, even from a profile the search would cut otherwise.
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  StrategyConfig searched;
  std::vector<std::string> notes;
  const Pipeline first = resolve_pipeline(profile, cluster, searched, notes, kPipedreamPartition);
  StrategyConfig again = StrategyConfig::from_resolved(searched.resolved(), "run.json");
  Profile slower_front = profile;
  slower_front.layers[0].forward_s = 10e-3;
  slower_front.layers[0].backward_s = 20e-3;
  const Pipeline second = resolve_pipeline(slower_front, cluster, again, notes, kPipedreamPartition);
  ASSERT_EQ(second.stage_count(), first.stage_count());
  for (size_t k = 0; k < first.stages.size(); ++k) {
    EXPECT_EQ(second.stages[k].layers, first.stages[k].layers);
    EXPECT_EQ(second.stages[k].replicas, first.stages[k].replicas);
  }
  EXPECT_EQ(again.resolved(), searched.resolved());
}

TEST(Stages, DefaultIsOneStagePerDeviceFromThePartitionSearch) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  StrategyConfig config;
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(1, 4), config, notes, kStraight);
  // 4 devices, 8 equal layers: 2 layers per stage.
  ASSERT_EQ(pipe.stage_count(), 4);
  EXPECT_EQ(pipe.devices, 4);
  EXPECT_EQ(pipe.stages[2].layers, (LayerRange{4, 5}));
  EXPECT_EQ(config.resolved().at("stages"), nlohmann::json::parse("[[0,1],[2,3],[4,5],[6,7]]"));
  EXPECT_EQ(config.resolved().at("replicas"), nlohmann::json::parse("[1,1,1,1]"));
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("default partition"), std::string::npos);
  EXPECT_NE(notes.back().find("PipeDream's dynamic program"), std::string::npos);
}

TEST(Stages, DefaultPartitionAvoidsCuttingAtAHugeActivation) {
  // 4 layers of F 1, B 2 ms, 1 MB weights (update 5 × 1 MB / 100 GB/s =
  // 0.05 ms); layer 1 outputs 1 GB. The compute-balanced cut 0-1 | 2-3 would
  // send it: 2 × (1 GB / 10 GB/s + 10 us) = 200 ms. Cutting after layer 0 (or
  // 2) sends 1 MB (0.22 ms) and leaves stages of 3.05 and 9.15 ms: 9.15 ms.
  Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  profile.layers[1].activation_bytes = 1e9;
  StrategyConfig config;
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(1, 2), config, notes, kStraight);
  ASSERT_EQ(pipe.stage_count(), 2);
  EXPECT_NE(pipe.stages[0].layers.last, 1);
  EXPECT_NEAR(testing_fixtures::run_strategy("pipedream", profile, simple_cluster(1, 2), {{"replicate", "false"}}).iteration_s, 9.15e-3, 1e-9);
}

TEST(Stages, BalancedPartitionMatchesBruteForce) {
  const Profile profile = irregular_profile();
  for (int64_t stages = 1; stages <= 8; ++stages) {
    const std::vector<int64_t> ones(static_cast<size_t>(stages), 1);
    const std::vector<LayerRange> ranges = balanced_partition(profile, stages);
    ASSERT_EQ(static_cast<int64_t>(ranges.size()), stages);
    EXPECT_NEAR(largest_stage_s(profile, ranges, ones), brute_force_best_s(profile, stages, ones), 1e-12)
        << stages << " stages";
  }
  // Three stages of F+B 3,9,1 | 4,12 | 2,7,5 ms: the best largest stage is 16 ms.
  EXPECT_NEAR(largest_stage_s(profile, balanced_partition(profile, 3), {1, 1, 1}), 16e-3, 1e-12);
}

TEST(Stages, BalancedPartitionWeighsStagesByReplicas) {
  const Profile profile = irregular_profile();
  const std::vector<int64_t> replicas = {3, 1, 2};
  const std::vector<LayerRange> ranges = balanced_partition(profile, 3, replicas);
  EXPECT_NEAR(largest_stage_s(profile, ranges, replicas), brute_force_best_s(profile, 3, replicas), 1e-12);
}

TEST(Stages, DefaultStageCountIsCappedAtLayerCount) {
  const Profile profile = chain_profile(3, 1e-3, 2e-3, 1e6, 1e6);
  StrategyConfig config;
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(2, 4), config, notes, kStraight);
  EXPECT_EQ(pipe.stage_count(), 3);
  EXPECT_EQ(pipe.devices, 3);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("only 3 layers"), std::string::npos);
}

TEST(Stages, ExplicitRangesAreSummedPerStage) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 4e6);
  StrategyConfig config;
  config.set("stages", "0-4,5-7", "--set stages");
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(1, 4), config, notes, kStraight);
  ASSERT_EQ(pipe.stage_count(), 2);
  EXPECT_TRUE(notes.empty());
  // Stage 0: five layers of 1 + 2 ms and 1 MB; update 5 × 5e6 / 100e9 = 0.25 ms.
  EXPECT_NEAR(pipe.stages[0].forward_s, 5e-3, 1e-15);
  EXPECT_NEAR(pipe.stages[0].backward_s, 10e-3, 1e-15);
  EXPECT_DOUBLE_EQ(pipe.stages[0].param_bytes, 5e6);
  EXPECT_NEAR(pipe.stages[0].update_s, 0.25e-3, 1e-15);
  EXPECT_DOUBLE_EQ(pipe.stages[0].activation_bytes, 20e6);
  // Layer 4's 4 MB output is all that crosses: stage 0 sends it, stage 1 receives it.
  EXPECT_DOUBLE_EQ(pipe.stages[0].output_bytes, 4e6);
  EXPECT_DOUBLE_EQ(pipe.stages[1].input_bytes, 4e6);
  EXPECT_EQ(pipe.devices, 2);
}

TEST(Stages, IntegerStageCountIsBalanced) {
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  StrategyConfig config;
  config.set("stages", "3", "--set stages");
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(1, 4), config, notes, kStraight);
  ASSERT_EQ(pipe.stage_count(), 3);
  EXPECT_EQ(config.resolved().at("stages"), nlohmann::json::parse("[[0,1],[2,3],[4,5]]"));
}

TEST(Stages, ReplicasWithoutStagesSetTheStageCount) {
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  StrategyConfig config;
  config.set("replicas", "2,1", "--set replicas");
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, simple_cluster(1, 4), config, notes, kStraight);
  // Two stages; stage 0 has two replicas, so it takes 4 layers (12 ms / 2 = 6 ms)
  // and stage 1 two (6 ms): the only split with both at 6 ms.
  ASSERT_EQ(pipe.stage_count(), 2);
  EXPECT_EQ(pipe.stages[0].layers, (LayerRange{0, 3}));
  EXPECT_EQ(pipe.devices, 3);
}

void expect_input_error(const Profile& profile, const Cluster& cluster, const std::string& key,
                        const std::string& value, const std::string& where, bool read_replicas = true,
                        const PartitionDefaults& defaults = kStraight) {
  StrategyConfig config;
  config.set(key, value, "--set " + key);
  std::vector<std::string> notes;
  try {
    resolve_pipeline(profile, cluster, config, notes, defaults, read_replicas);
    ADD_FAILURE() << key << "=" << value << " was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), where) << e.what();
  }
}

TEST(Stages, MoreStagesThanLayersIsAnInputError) {
  const Profile profile = chain_profile(3, 1e-3, 2e-3, 1e6, 1e6);
  expect_input_error(profile, simple_cluster(1, 8), "stages", "4", "--set stages");
  expect_input_error(profile, simple_cluster(1, 8), "stages", "0-0,1-1,2-2,3-3", "--set stages");
  expect_input_error(profile, simple_cluster(1, 8), "replicas", "1,1,1,1", "--set replicas");
}

TEST(Stages, MoreStagesThanDevicesIsAnInputError) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  expect_input_error(profile, simple_cluster(1, 2), "stages", "0-1,2-3,4-7", "--set stages");
  expect_input_error(profile, simple_cluster(1, 2), "stages", "3", "--set stages");
}

TEST(Stages, ReplicasMustMatchStagesAndFitTheDevices) {
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  StrategyConfig mismatch;
  mismatch.set("stages", "0-3,4-7", "--set stages");
  mismatch.set("replicas", "1,1,1", "--set replicas");
  std::vector<std::string> notes;
  EXPECT_THROW(resolve_pipeline(profile, cluster, mismatch, notes, kStraight), InputError);
  expect_input_error(profile, cluster, "replicas", "2,3", "--set replicas");  // 5 devices of 4
  expect_input_error(profile, cluster, "replicas", "2,0", "--set replicas");
}

TEST(Stages, SkipEdgeCrossesEveryBoundaryItSpans) {
  // a -> b -> c -> d -> e, and a also feeds c and d (residual edges).
  // Activations 1, 2, 4, 8, 16 MB. Stages [a,b] [c] [d,e].
  Profile p = chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("a", {"input"}, 1e-3, 1e-3, 0, 1e6));
  p.layers.push_back(layer("b", {"a"}, 1e-3, 1e-3, 0, 2e6));
  p.layers.push_back(layer("c", {"b", "a"}, 1e-3, 1e-3, 0, 4e6));
  p.layers.push_back(layer("d", {"c", "a"}, 1e-3, 1e-3, 0, 8e6));
  p.layers.push_back(layer("e", {"d"}, 1e-3, 1e-3, 0, 16e6));
  const std::vector<double> bytes = boundary_bytes(p, {{0, 1}, {2, 2}, {3, 4}});
  ASSERT_EQ(bytes.size(), 2u);
  // Boundary 0: b (feeds c) and a (feeds c and d: counted once) = 2 + 1 MB.
  EXPECT_DOUBLE_EQ(bytes[0], 3e6);
  // Boundary 1: c (feeds d) and a, relayed past stage 1 to d = 4 + 1 MB; b stops at c.
  EXPECT_DOUBLE_EQ(bytes[1], 5e6);
}

TEST(Stages, ReplicatedStageTimeIsPipeDreamFormula) {
  const LinkSpec link{10e9, 1e-5};
  // W^3 = 2·(3-1)·1 MB / 10 GB/s = 0.4 ms; latency plays no part in §4's formula.
  EXPECT_NEAR(weight_sync_s(3, 1e6, link), 4e-4, 1e-15);
  EXPECT_EQ(weight_sync_s(1, 1e6, link), 0.0);
  // T = (1/m)·max(ΣT_l, W^m): compute-bound 3 ms / 3 = 1 ms, sync-bound 0.4 ms / 3.
  EXPECT_NEAR(replicated_stage_s(3e-3, 3, 4e-4), 1e-3, 1e-15);
  EXPECT_NEAR(replicated_stage_s(1e-4, 3, 4e-4), 4e-4 / 3, 1e-15);
}

TEST(Stages, BoundaryCommIsTwiceTheActivationsOverBandwidthPlusLatencies) {
  // 2·(1 MB / 10 GB/s + 10 us) = 2·(100 + 10) us = 220 us.
  EXPECT_NEAR(boundary_comm_s(1e6, LinkSpec{10e9, 1e-5}), 2.2e-4, 1e-15);
}

TEST(Stages, StagesFillMachinesInOrder) {
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(2, 2);  // devices 0,1 on machine 0; 2,3 on machine 1
  // Replicas 2,1,1: stage 0 on devices 0-1, stage 1 on 2, stage 2 on 3.
  const Pipeline a = build_pipeline(profile, cluster, {{0, 1}, {2, 3}, {4, 5}}, {2, 1, 1});
  EXPECT_EQ(a.stages[1].first_device, 2);
  EXPECT_EQ(a.stages[0].replica_link.bandwidth_bytes_per_s, cluster.intra_link.bandwidth_bytes_per_s);
  EXPECT_EQ(a.boundaries[0].link.bandwidth_bytes_per_s, cluster.inter_link.bandwidth_bytes_per_s);
  EXPECT_EQ(a.boundaries[1].link.bandwidth_bytes_per_s, cluster.intra_link.bandwidth_bytes_per_s);
  // Replicas 1,2,1: stage 1 on devices 1-2 spans machines; W^2 = 2·1·2 MB / 1 GB/s = 4 ms.
  const Pipeline b = build_pipeline(profile, cluster, {{0, 1}, {2, 3}, {4, 5}}, {1, 2, 1});
  EXPECT_EQ(b.stages[1].replica_link.bandwidth_bytes_per_s, cluster.inter_link.bandwidth_bytes_per_s);
  EXPECT_NEAR(b.stages[1].weight_sync_s, 4e-3, 1e-15);
  // Boundary 1 joins stage 1 (devices 1-2) and stage 2 (device 3): machines 0 and 1.
  EXPECT_EQ(b.boundaries[1].link.bandwidth_bytes_per_s, cluster.inter_link.bandwidth_bytes_per_s);
}

TEST(Stages, OneFOneBInFlightIsNoamAtTheInputStage) {
  const Profile profile = chain_profile(6, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 8);
  const Pipeline plain = build_pipeline(profile, cluster, {{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  EXPECT_EQ(one_f_one_b_in_flight(plain, 0), 3);  // S - k
  EXPECT_EQ(one_f_one_b_in_flight(plain, 2), 1);
  // Replicas 2,3,1: NOAM = ⌈6 workers / 2⌉ = 3; stage 1: ⌈(3 + 1) / 3⌉ = 2.
  const Pipeline replicated = build_pipeline(profile, cluster, {{0, 1}, {2, 3}, {4, 5}}, {2, 3, 1});
  EXPECT_EQ(one_f_one_b_in_flight(replicated, 0), 3);
  EXPECT_EQ(one_f_one_b_in_flight(replicated, 1), 2);
}

TEST(Stages, StalenessCountsOnlyTheStagesThatHoldParameters) {
  // Four layers on three stages, 0-0, 1-1 and 2-3. With weights everywhere the
  // input stage lags most: pipedream S - 1 = 2, dualpipe 2(S - 1) = 4, dsp's
  // m_0 = 4 (queues DSP(1,1,0;4,2,0)).
  Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  const Cluster cluster = simple_cluster(1, 3);
  const testing_fixtures::Settings stages = {{"stages", "0-0,1-1,2-3"}};
  const testing_fixtures::Settings unreplicated = {{"stages", "0-0,1-1,2-3"}, {"replicate", "false"}};
  EXPECT_EQ(testing_fixtures::run_strategy("pipedream", profile, cluster, unreplicated).staleness, 2);
  EXPECT_EQ(testing_fixtures::run_strategy("pipedream-sync", profile, cluster, stages).staleness, 2);
  EXPECT_EQ(testing_fixtures::run_strategy("dualpipe", profile, cluster, stages).staleness, 4);
  EXPECT_EQ(testing_fixtures::run_strategy("dsp", profile, cluster, stages).staleness, 4);
  // A weightless input stage (a flatten) has no gradient to be stale: stage 1
  // lags S - 2 = 1, 2(S - 2) = 2 and m_1 = 2.
  profile.layers[0].param_bytes = 0;
  EXPECT_EQ(testing_fixtures::run_strategy("pipedream", profile, cluster, unreplicated).staleness, 1);
  EXPECT_EQ(testing_fixtures::run_strategy("pipedream-sync", profile, cluster, stages).staleness, 1);
  EXPECT_EQ(testing_fixtures::run_strategy("dualpipe", profile, cluster, stages).staleness, 2);
  EXPECT_EQ(testing_fixtures::run_strategy("dsp", profile, cluster, stages).staleness, 2);
  // Weights only on the last stage: nothing is stale.
  profile.layers[1].param_bytes = 0;
  EXPECT_EQ(testing_fixtures::run_strategy("pipedream", profile, cluster, unreplicated).staleness, 0);
  EXPECT_EQ(testing_fixtures::run_strategy("dsp", profile, cluster, stages).staleness, 0);
}

}  // namespace
}  // namespace trainsim
