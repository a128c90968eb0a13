// cgdp chunk searches (sim/search/chunk.hpp): the exact search against brute
// force and a hand-computed case, the seed's uniform sweep on ResNet-152
// (seed 003 figure 2's U shape) and Algorithm 1 against simulated lapses.
#include "sim/search/chunk.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/search/chunk_heuristic.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::simple_cluster;

std::string ranges_text(const std::vector<LayerRange>& ranges) {
  std::string text;
  for (const LayerRange& r : ranges) text += (text.empty() ? "" : ",") + std::to_string(r.first) + "-" + std::to_string(r.last);
  return text;
}

// Every contiguous chunking of n layers: bit i of `mask` cuts after layer i.
std::vector<LayerRange> chunking_of_mask(uint32_t mask, int64_t n) {
  std::vector<LayerRange> chunks;
  int64_t first = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == n - 1 || ((mask >> i) & 1u) != 0) {
      chunks.push_back({first, i});
      first = i + 1;
    }
  }
  return chunks;
}

double brute_force_best_s(const Profile& profile, const Cluster& cluster, int64_t workers) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  double best_s = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    best_s = std::min(best_s, cgdp_backward_s(profile, cluster, workers, chunking_of_mask(mask, n)));
  }
  return best_s;
}

Profile random_profile(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time_s(0.02e-3, 2e-3);
  std::uniform_real_distribution<double> bytes(1e5, 2e7);
  std::bernoulli_distribution without_params(0.3);
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  std::string previous = "input";
  for (int i = 0; i < n; ++i) {
    const std::string name = "l" + std::to_string(i);
    p.layers.push_back(layer(name, {previous}, time_s(rng), time_s(rng), without_params(rng) ? 0.0 : bytes(rng), 1e6));
    previous = name;
  }
  return p;
}

TEST(ExactChunking, EqualsBruteForceOnRandomProfiles) {
  std::mt19937 rng(2018);
  Cluster slow_sync = simple_cluster(1, 4);
  slow_sync.host.stream_sync_s = 0.5e-3;  // makes merging chunks pay off
  const std::vector<Cluster> clusters = {simple_cluster(1, 4), slow_sync, simple_cluster(2, 2)};
  for (int trial = 0; trial < 60; ++trial) {
    const Profile profile = random_profile(rng, 1 + trial % 12);
    const Cluster& cluster = clusters[static_cast<size_t>(trial) % clusters.size()];
    const Chunking exact = exact_cgdp_chunking(profile, cluster, 4).value();
    const double brute_s = brute_force_best_s(profile, cluster, 4);
    EXPECT_NEAR(exact.backward_s, brute_s, 1e-12 * brute_s) << "trial " << trial;
  }
}

TEST(ExactChunking, BackwardTimeIsTheCgdpCostModels) {
  // predict_cgdp: iteration = Σfw + Σbw + update + (T − Σbw), so T is
  // exposed_comm_s + Σbw for the chunks the search returns.
  std::mt19937 rng(7);
  Cluster cluster = simple_cluster(1, 4);
  cluster.host.stream_sync_s = 0.2e-3;
  const Profile profile = random_profile(rng, 10);
  const Chunking exact = exact_cgdp_chunking(profile, cluster, 4).value();
  const Prediction p = testing_fixtures::run_strategy("cgdp", profile, cluster, {{"chunks", ranges_text(exact.chunks)}});
  EXPECT_NEAR(p.breakdown.exposed_comm_s + model_totals(profile).backward_s, exact.backward_s, 1e-12);
}

TEST(ExactChunking, MergesTheTopTwoLayersWhenSyncsAreCostly) {
  // Three layers, backward 0.1 ms and 1 MB each; one machine of 4: D2H = H2D =
  // 10 us + 1e6/1e10 = 0.11 ms per MB-chunk, host sum 4·1e6/2e10 = 0.2 ms per
  // MB; stream sync raised to 0.5 ms. Candidates (T in ms):
  //  {2},{1},{0}: last chunk ready 3·0.6 = 1.8, no queueing: 1.8 + 0.42 = 2.22
  //  {2,1,0}: ready 0.3 + 0.5 = 0.8; 3 MB: 0.31 + 0.6 + 0.31 → 2.02
  //  {2},{1,0}: {2} ready 0.6 → D2H 0.71, sum 0.91, H2D 1.02; {1,0} ready
  //    0.6 + 0.2 + 0.5 = 1.3; 2 MB: D2H 1.51, sum 1.91, H2D 2.12 → 2.12
  //  {2,1},{0}: ready 0.7; 2 MB: D2H 0.91, sum 1.31, H2D 1.52; {0} ready
  //    0.7 + 0.1 + 0.5 = 1.3: D2H 1.41, sum max(1.41, 1.31) + 0.2 = 1.61,
  //    H2D max(1.61, 1.52) + 0.11 = 1.72 → 1.72, the least.
  Profile p = testing_fixtures::chain_profile(3, 0.1e-3, 0.1e-3, 1e6, 1e6);
  Cluster cluster = simple_cluster(1, 4);
  cluster.host.stream_sync_s = 0.5e-3;
  const Chunking exact = exact_cgdp_chunking(p, cluster, 4).value();
  EXPECT_EQ(exact.chunks, (std::vector<LayerRange>{{0, 0}, {1, 2}}));
  EXPECT_NEAR(exact.backward_s, 1.72e-3, 1e-12);
}

TEST(ExactChunking, AModelWithoutParametersIsOneChunkOfPureBackward) {
  // No gradients: no sync, no copies, T = Σbw = 4 · 1 ms.
  const Profile p = testing_fixtures::chain_profile(4, 1e-3, 1e-3, 0, 1e6);
  const Chunking exact = exact_cgdp_chunking(p, simple_cluster(1, 4), 4).value();
  EXPECT_NEAR(exact.backward_s, 4e-3, 1e-15);
  EXPECT_TRUE(uniform_chunk_sweep(p, simple_cluster(1, 4), 4).empty());
}

TEST(ExactChunking, GivesUpPastItsWorkBudget) {
  std::mt19937 rng(5);
  const Profile profile = random_profile(rng, 12);
  EXPECT_FALSE(exact_cgdp_chunking(profile, simple_cluster(1, 4), 4, 10).has_value());
  EXPECT_TRUE(exact_cgdp_chunking(profile, simple_cluster(1, 4), 4).has_value());
}

TEST(BoundedChunking, IsTheExactOptimumWithinTheBudget) {
  std::mt19937 rng(9);
  const Profile profile = random_profile(rng, 12);
  const Cluster cluster = simple_cluster(2, 2);
  const Chunking bounded = bounded_cgdp_chunking(profile, cluster, 4);
  EXPECT_TRUE(bounded.optimal);
  EXPECT_DOUBLE_EQ(bounded.backward_s, exact_cgdp_chunking(profile, cluster, 4).value().backward_s);
  EXPECT_DOUBLE_EQ(bounded.lower_bound_s, bounded.backward_s);
}

TEST(BoundedChunking, PastTheBudgetBracketsTheOptimumBetweenItsBoundAndItsChunking) {
  // A budget of 30 comparisons stops the exact search on 12 layers: the
  // coarse search and the local search answer, and the optimum (brute force)
  // lies between the proven lower bound and the chunking found.
  std::mt19937 rng(2018);
  Cluster slow_sync = simple_cluster(1, 4);
  slow_sync.host.stream_sync_s = 0.5e-3;
  const std::vector<Cluster> clusters = {simple_cluster(1, 4), slow_sync, simple_cluster(2, 2)};
  for (int trial = 0; trial < 24; ++trial) {
    const Profile profile = random_profile(rng, 12);
    const Cluster& cluster = clusters[static_cast<size_t>(trial) % clusters.size()];
    const Chunking bounded = bounded_cgdp_chunking(profile, cluster, 4, 30);
    const double optimum_s = brute_force_best_s(profile, cluster, 4);
    EXPECT_FALSE(bounded.optimal);
    EXPECT_LE(bounded.lower_bound_s, optimum_s * (1 + 1e-12)) << "trial " << trial;
    EXPECT_GE(bounded.backward_s, optimum_s * (1 - 1e-12)) << "trial " << trial;
    EXPECT_NEAR(bounded.backward_s, cgdp_backward_s(profile, cluster, 4, bounded.chunks), 1e-15);
    EXPECT_GE(bounded.optimality_gap(), 0);
  }
}

TEST(UniformSweep, ChunkSizeOneIsTheCgdpDefault) {
  // cgdp without chunks or chunk_size lays out chunk size 1 (seed_chunk_layout).
  std::mt19937 rng(3);
  const Profile profile = random_profile(rng, 8);
  const Cluster cluster = simple_cluster(1, 4);
  const std::vector<UniformChunkPoint> sweep = uniform_chunk_sweep(profile, cluster, 4);
  ASSERT_FALSE(sweep.empty());
  EXPECT_EQ(sweep.front().chunking.chunks, seed_chunk_layout(profile, 1));
  EXPECT_EQ(sweep.back().chunk_size, static_cast<int64_t>(sweep.size()));
}

// Seed 003 figure 2 and Table 1: ResNet-152, batch 12 per GPU, four P100s.
struct Resnet152OnPower8 : ::testing::Test {
  static void SetUpTestSuite() {
    cluster = new Cluster(load_cluster("p100x4-nvlink-power8"));
    profile = new Profile(analytic_profile(build_zoo_model("resnet152"), 12, *cluster));
  }
  static void TearDownTestSuite() {
    delete profile;
    delete cluster;
  }
  static Cluster* cluster;
  static Profile* profile;
};
Cluster* Resnet152OnPower8::cluster = nullptr;
Profile* Resnet152OnPower8::profile = nullptr;

TEST_F(Resnet152OnPower8, UniformSweepFallsThenRises) {
  const std::vector<UniformChunkPoint> sweep = uniform_chunk_sweep(*profile, *cluster, 4);
  ASSERT_GE(sweep.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < sweep.size(); ++i) {
    if (sweep[i].chunking.backward_s < sweep[best].chunking.backward_s) best = i;
  }
  EXPECT_GT(best, 0u);
  EXPECT_LT(best, sweep.size() - 1);
  EXPECT_GT(sweep.front().chunking.backward_s, sweep[best].chunking.backward_s);
  EXPECT_GT(sweep.back().chunking.backward_s, sweep[best].chunking.backward_s);
}

TEST_F(Resnet152OnPower8, ExactIsNeverSlowerThanUniformOrAlgorithmOne) {
  const Chunking exact = exact_cgdp_chunking(*profile, *cluster, 4, kExactChunkWorkBudget).value();
  double best_uniform_s = std::numeric_limits<double>::infinity();
  for (const UniformChunkPoint& point : uniform_chunk_sweep(*profile, *cluster, 4)) {
    best_uniform_s = std::min(best_uniform_s, point.chunking.backward_s);
  }
  HeuristicChunkOptions options;
  options.jitter = 0.02;
  const HeuristicChunkResult heuristic = heuristic_cgdp_chunking(*profile, *cluster, 4, options);
  EXPECT_LE(exact.backward_s, best_uniform_s * (1 + 1e-12));
  EXPECT_LE(exact.backward_s, heuristic.chunking.backward_s * (1 + 1e-12));
}

TEST(BoundedChunking, Resnet1001OnEightH100sIsWithinOnePercentOfTheOptimum) {
  // 3,338 layers: the exact search passes its budget; the bounded one states
  // its distance from the optimum through the lower bound.
  const Cluster cluster = load_cluster("h100x8-nvlink");
  const Profile profile = analytic_profile(build_zoo_model("resnet1001"), 64, cluster);
  const Chunking bounded = bounded_cgdp_chunking(profile, cluster, 8);
  EXPECT_GE(bounded.backward_s, bounded.lower_bound_s);
  EXPECT_LT(bounded.optimality_gap(), 0.01);
  EXPECT_LE(bounded.backward_s, cgdp_backward_s(profile, cluster, 8, seed_chunk_layout(profile, 1)));
}

TEST(HeuristicChunking, FollowsAlgorithmOnesStepAndStopRules) {
  // step 3, range 2: chunk sizes 1, 2 (below step, +1), then 3, 6, 9, ... (+3);
  // it stops once chunk ≥ best + 3·2 or the 12 parameter layers run out.
  const Profile p = testing_fixtures::chain_profile(12, 1e-3, 1e-3, 1e6, 1e6);
  HeuristicChunkOptions options;
  options.step = 3;
  options.range = 2;
  const HeuristicChunkResult r = heuristic_cgdp_chunking(p, simple_cluster(1, 4), 4, options);
  ASSERT_GE(r.trials.size(), 3u);
  EXPECT_EQ(r.trials[0].chunk_size, 1);
  EXPECT_EQ(r.trials[1].chunk_size, 2);
  EXPECT_EQ(r.trials[2].chunk_size, 3);
  for (size_t i = 3; i < r.trials.size(); ++i) EXPECT_EQ(r.trials[i].chunk_size, r.trials[i - 1].chunk_size + 3);
  const int64_t next = r.trials.back().chunk_size + 3;
  EXPECT_TRUE(next >= r.best_chunk_size + 6 || next > 12);
  EXPECT_EQ(r.chunking.chunks, seed_chunk_layout(p, r.best_chunk_size));
}

TEST(HeuristicChunking, RejectsAStepBelowOne) {
  HeuristicChunkOptions options;
  options.step = 0;
  EXPECT_THROW(heuristic_cgdp_chunking(testing_fixtures::two_layer_profile(), simple_cluster(1, 4), 4, options),
               InputError);
}

}  // namespace
}  // namespace trainsim
