// The ranking `choose` and `report` share: ties within 1% of samples/s broken
// by no staleness, less memory, simplicity; and the explanation, which
// compares like with like.
#include "sim/search/rank.hpp"

#include <gtest/gtest.h>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/search/choose.hpp"

namespace trainsim {
namespace {

Prediction made(const std::string& strategy, double samples_per_s, int64_t staleness, double memory_bytes,
                double samples_per_iteration = 256) {
  Prediction p;
  p.strategy = strategy;
  p.samples_per_s = samples_per_s;
  p.samples_per_iteration = samples_per_iteration;
  p.iteration_s = samples_per_iteration / samples_per_s;
  p.breakdown.compute_s = p.iteration_s;
  p.staleness = staleness;
  p.memory = {DeviceMemory{memory_bytes, 0, 0, 0, 0}};
  return p;
}

std::vector<std::string> order(const std::vector<Prediction>& predictions, const std::vector<RankEntry>& ranked) {
  std::vector<std::string> ids;
  for (const RankEntry& e : ranked) ids.push_back(predictions[e.index].strategy);
  return ids;
}

TEST(Rank, TieWithinOnePercentPutsTheSynchronousStrategyFirstAndSaysTie) {
  // pipesgd is 0.04% faster but one iteration stale; dp-ring is 7% slower.
  const std::vector<Prediction> p = {made("pipesgd", 270.1, 1, 8e9), made("dp-overlap", 270.0, 0, 8e9),
                                     made("dp-ring", 250.8, 0, 8e9)};
  const std::vector<RankEntry> ranked = rank_predictions(p, {true, true, true});
  EXPECT_EQ(order(p, ranked), (std::vector<std::string>{"dp-overlap", "pipesgd", "dp-ring"}));
  EXPECT_EQ(ranked[0].rank, 1);
  EXPECT_EQ(ranked[1].rank, 1);
  EXPECT_TRUE(ranked[0].tied && ranked[1].tied);
  EXPECT_EQ(ranked[2].rank, 3);
  EXPECT_FALSE(ranked[2].tied);
  EXPECT_EQ(rank_text(ranked[0].rank, ranked[0].tied), "1=");
  EXPECT_EQ(rank_text(ranked[2].rank, ranked[2].tied), "3");
  EXPECT_EQ(explain_ranking(p, ranked),
            "dp-overlap and pipesgd tie at 270 to 270.1 samples/s (within 1%, the predictions' resolution); "
            "dp-overlap ranks first for no stale gradients (pipesgd's are 1 iteration stale); next is dp-ring at "
            "250.8 samples/s, 7.1% slower than dp-overlap");
}

TEST(Rank, TieBreaksByMemoryThenSimplicity) {
  // All tie and none is stale: less memory first, then simplicity_order().
  const std::vector<Prediction> p = {made("pipedream", 100, 0, 8e9, 64), made("gpipe", 99.5, 0, 8e9, 64),
                                     made("dualpipe", 99.8, 0, 4e9, 64)};
  const std::vector<RankEntry> ranked = rank_predictions(p, {true, true, true});
  EXPECT_EQ(order(p, ranked), (std::vector<std::string>{"dualpipe", "gpipe", "pipedream"}));
  EXPECT_NE(explain_ranking(p, ranked).find("dualpipe ranks first for less memory per device (3.7 GiB against "
                                            "gpipe's 7.5 GiB)"),
            std::string::npos)
      << explain_ranking(p, ranked);
  EXPECT_EQ(tie_break_reason(p[1], p[0]), "being the simpler strategy (pipedream has the same staleness and memory)");
  EXPECT_LT(simplicity_rank("single"), simplicity_rank("dp-ring"));
  EXPECT_LT(simplicity_rank("pipesgd"), simplicity_rank("parallax"));
  EXPECT_EQ(simplicity_rank("not-a-strategy"), simplicity_order().size());
}

TEST(Rank, ATieGroupIsEveryoneWithinOnePercentOfItsFastest) {
  // 1% apart exactly is not a tie; a group does not chain: 98.8 is 1.2% below 100.
  EXPECT_TRUE(samples_per_s_tie(100, 99.01));
  EXPECT_FALSE(samples_per_s_tie(100, 99));
  const std::vector<Prediction> p = {made("pipesgd", 100, 1, 8e9), made("dp-ring", 99.5, 0, 8e9),
                                     made("dp-ps", 98.8, 0, 1e9), made("single", 10, 0, 16e9)};
  const std::vector<RankEntry> ranked = rank_predictions(p, {true, true, true, false});
  EXPECT_EQ(order(p, ranked), (std::vector<std::string>{"dp-ring", "pipesgd", "dp-ps", "single"}));
  EXPECT_EQ(ranked[2].rank, 3);
  EXPECT_FALSE(ranked[2].tied);
  EXPECT_FALSE(ranked[3].feasible);  // excluded: last, unranked
  EXPECT_EQ(rank_text(ranked[3].rank, ranked[3].tied), "-");
}

TEST(Rank, AClearWinnerIsComparedPerTheSameSamplesNotPerIteration) {
  // A data-parallel step of 256 samples in 0.8 s against a pipeline's
  // mini-batch of 64 in 0.25 s: per 256 samples 0.8 s against 1 s, the
  // pipeline's extra 0.2 s all idle from imbalance (0.05 s per mini-batch).
  Prediction w = made("dp-ring", 320, 0, 8e9, 256);
  w.breakdown = {0.7, 0.1, 0, 0};
  Prediction r = made("gpipe", 256, 0, 4e9, 64);
  r.breakdown = {0.2, 0, 0, 0.05};
  const std::vector<Prediction> p = {r, w};
  const std::vector<RankEntry> ranked = rank_predictions(p, {true, true});
  EXPECT_EQ(explain_ranking(p, ranked),
            "dp-ring is fastest at 320 samples/s, 25% ahead of gpipe (256 samples/s): per 256 samples (one iteration "
            "of dp-ring) it takes 800 ms and gpipe 1 s, most of the difference in imbalance (+200 ms)");
}

TEST(Rank, Vgg16OnFourP40sIsATieNamedAsOneAndWonBySynchronousTraining) {
  // The report's case: six strategies within 1% of 270 samples/s.
  const Cluster cluster = load_cluster("p40x4-pcie3");
  const Profile profile = analytic_profile(build_zoo_model("vgg16"), 64, cluster);
  const std::vector<StrategyChoice> ranked = choose_strategies(profile, cluster, {});
  ASSERT_TRUE(ranked[0].tied);
  EXPECT_EQ(ranked[0].best.staleness, 0);
  const std::string why = explain_winner(ranked);
  EXPECT_NE(why.find(" tie at "), std::string::npos) << why;
  EXPECT_NE(
      why.find(" samples/s (within 1%, the predictions' resolution); " + ranked[0].best.strategy + " ranks first for "),
      std::string::npos)
      << why;
  EXPECT_EQ(why.find("per iteration"), std::string::npos) << why;
  // Every stale strategy of the tie ranks after every synchronous one.
  bool stale_seen = false;
  for (const StrategyChoice& c : ranked) {
    if (c.rank != 1) break;
    if (c.best.staleness > 0)
      stale_seen = true;
    else
      EXPECT_FALSE(stale_seen) << c.best.strategy;
  }
}

}  // namespace
}  // namespace trainsim
