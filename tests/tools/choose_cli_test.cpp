// `trainsim choose` and `predict` as a user reads them: ties shown as ties
// with their rule, and an iteration's samples beside its time.
#include <gtest/gtest.h>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

TEST(ChooseCli, Vgg16OnFourP40sPrintsTheTieItsRuleAndNoStaleWinner) {
  const auto r = run_cli({"choose", "--model", "vgg16", "--batch", "64", "--cluster", "p40x4-pcie3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("samples/s  speedup  samples/iter  time/iter"), std::string::npos) << r.out;
  // The first row is a shared first place, and it is not the stale pipesgd.
  const size_t rule = r.out.find("\n-");
  ASSERT_NE(rule, std::string::npos);
  const size_t first_row = r.out.find('\n', rule + 1) + 1;
  const std::string row = r.out.substr(first_row, r.out.find('\n', first_row) - first_row);
  EXPECT_EQ(row.substr(row.find_first_not_of(' ')).rfind("1=  ", 0), 0u) << row;
  EXPECT_EQ(row.find("pipesgd"), std::string::npos) << row;
  EXPECT_NE(r.out.find("\n=: a tie, samples/s within 1% (the predictions' resolution), ordered by no stale "
                       "gradients, then less memory per device, then the simpler strategy (single < dp-ring"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" tie at 268.7 to 270.1 samples/s (within 1%, the predictions' resolution); "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("wins"), std::string::npos) << r.out;
}

TEST(ChooseCli, PredictShowsWhatAnIterationHolds) {
  // dp-ring's iteration is a global step of 4 x 64 samples, pipedream's one mini-batch of 64.
  const auto r = run_cli({"predict", "--model", "vgg16", "--batch", "64", "--cluster", "p40x4-pcie3", "--strategies",
                          "dp-ring,pipedream"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("samples/s  speedup  samples/iter  time/iter"), std::string::npos) << r.out;
  const size_t ring = r.out.find("\ndp-ring ");
  const size_t pipe = r.out.find("\npipedream ");
  ASSERT_NE(ring, std::string::npos);
  ASSERT_NE(pipe, std::string::npos);
  EXPECT_NE(r.out.substr(ring, r.out.find('\n', ring + 1) - ring).find("  256  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(pipe, r.out.find('\n', pipe + 1) - pipe).find("   64  "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace trainsim
