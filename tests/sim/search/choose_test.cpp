// `choose`: each strategy at its best setting, feasible ones ranked by
// samples/s, the rest excluded with the memory they need.
#include "sim/search/choose.hpp"

#include <gtest/gtest.h>

#include "sim/cost/strategies.hpp"
#include "sim/search/rank.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

TEST(Choose, RanksEveryStrategyFastestFirst) {
  // Fastest first, except within a tie (rank.hpp): a rank's entries are all
  // within 1% of its first, and each is faster than every later rank.
  const Profile profile = chain_profile(8, 1e-3, 2e-3, 4e6, 2e6);
  const std::vector<StrategyChoice> ranked = choose_strategies(profile, simple_cluster(2, 2), {});
  ASSERT_EQ(ranked.size(), strategy_registry().size());
  size_t group = 0;
  for (size_t i = 1; i < ranked.size(); ++i) {
    ASSERT_TRUE(ranked[i].feasible);
    if (ranked[i].rank == ranked[group].rank) {
      EXPECT_TRUE(ranked[i].tied && samples_per_s_tie(ranked[group].best.samples_per_s, ranked[i].best.samples_per_s));
    } else {
      EXPECT_EQ(ranked[i].rank, static_cast<int32_t>(i + 1));
      for (size_t j = group; j < i; ++j) EXPECT_GT(ranked[j].best.samples_per_s, ranked[i].best.samples_per_s);
      group = i;
    }
  }
  const std::string why = explain_winner(ranked);
  EXPECT_EQ(why.rfind(ranked[0].tied ? ranked[0].best.strategy : ranked[0].best.strategy + " is fastest at ", 0), 0u)
      << why;
}

TEST(Choose, ReportsProgressOverEverySettingItPrices) {
  // dp-ring: the defaults and four algorithms, five settings; the callback
  // hears 0..4 before each and 5 of 5 at the end.
  std::vector<std::pair<int64_t, int64_t>> heard;
  choose_strategies(chain_profile(4, 1e-3, 2e-3, 8e6, 1e6), simple_cluster(1, 4), {"dp-ring"},
                    [&heard](int64_t done, int64_t total) { heard.emplace_back(done, total); });
  ASSERT_EQ(heard.size(), 6u);
  for (size_t i = 0; i < heard.size(); ++i) EXPECT_EQ(heard[i], std::make_pair(static_cast<int64_t>(i), int64_t{5}));
}

TEST(Choose, PicksTheFastestAlgorithmOfDpRing) {
  // Each algorithm predicted on its own; choose must keep the fastest of them.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 8e6, 1e6);
  const Cluster cluster = simple_cluster(1, 4);
  double best = 0;
  for (const char* algorithm : {"ring", "recursive-doubling", "rabenseifner", "tree"}) {
    best = std::max(best, run_strategy("dp-ring", profile, cluster, {{"algorithm", algorithm}}).samples_per_s);
  }
  const std::vector<StrategyChoice> ranked = choose_strategies(profile, cluster, {"dp-ring"});
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_DOUBLE_EQ(ranked[0].best.samples_per_s, best);
  EXPECT_EQ(ranked[0].candidates, 5);  // the defaults and four algorithms
}

TEST(Choose, ExcludesWhatDoesNotFitWithTheMemoryItNeeds) {
  // 4 layers of 1 GB weights: a replica needs weights, gradients and
  // momentum, 12 GB, on a 16 GB device; the pipelines split them. With 2 GB
  // devices nothing fits: every entry is excluded with its reason.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e9, 1e6);
  Cluster cluster = simple_cluster(1, 4);
  cluster.device.memory_bytes = 2e9;
  const std::vector<StrategyChoice> ranked = choose_strategies(profile, cluster, {"single", "gpipe"});
  ASSERT_EQ(ranked.size(), 2u);
  for (const StrategyChoice& c : ranked) {
    EXPECT_FALSE(c.feasible);
    EXPECT_NE(c.reason.find("needs"), std::string::npos);
  }
  EXPECT_EQ(explain_winner(ranked), "no strategy fits the device memory");
  cluster.device.memory_bytes = 8e9;  // gpipe's 4 stages hold 3 GB each; single's 12 GB does not fit
  const std::vector<StrategyChoice> some = choose_strategies(profile, cluster, {"single", "gpipe"});
  EXPECT_TRUE(some[0].feasible);
  EXPECT_EQ(some[0].best.strategy, "gpipe");
  EXPECT_FALSE(some[1].feasible);
}

}  // namespace
}  // namespace trainsim
