// The executor's iteration time follows the simulator's steady-state rule,
// whole periods included.
#include <gtest/gtest.h>

#include "exec/training.hpp"

namespace trainsim {
namespace {

TEST(IterationStats, LeavesOutWarmupAndDrainAndTakesTheMedianInterval) {
  // 10 iterations: warm-up max(1, 10/5) = 2 at each end. Ends 0.5, 1, 2, 3,
  // 4.5, 5, 6, 7, 7.1, 7.2: intervals ending at iterations 2..7 are
  // 1, 1, 1.5, 0.5, 1, 1 (sorted 0.5 1 1 1 1 1.5): median 1, min 0.5, max 1.5.
  const IterationStats s = iteration_stats({0.5, 1, 2, 3, 4.5, 5, 6, 7, 7.1, 7.2});
  EXPECT_EQ(s.warmup, 2);
  EXPECT_DOUBLE_EQ(s.median_s, 1.0);
  EXPECT_DOUBLE_EQ(s.min_s, 0.5);
  EXPECT_DOUBLE_EQ(s.max_s, 1.5);
}

TEST(IterationStats, ReplicatedStagesEndIterationsInPairsAndCountWholePeriods) {
  // Two replicas end iterations 2k and 2k+1 together, every 2 s: 1 s per
  // iteration. Single intervals alternate 0.01 and 1.99 s and would mislead.
  std::vector<double> ends;
  for (int k = 0; k < 10; ++k) {
    ends.push_back(2.0 * (k + 1));
    ends.push_back(2.0 * (k + 1) + 0.01);
  }
  const IterationStats s = iteration_stats(ends, 2);
  EXPECT_NEAR(s.median_s, 1.0, 1e-12);
  EXPECT_NEAR(s.min_s, 1.0, 1e-12);
  EXPECT_NEAR(s.max_s, 1.0, 1e-12);
  EXPECT_LT(iteration_stats(ends, 1).min_s, 0.1);  // what one-iteration intervals would say
}

TEST(IterationStats, IterationsEndingInThePlansDrainAreLeftOut) {
  // 10 iterations of 1 s, then 4 that end in the plan's drain (0.01 s apart,
  // as pipesgd's pending updates): with the drain named, the median is 1 s
  // like the simulator's; without it, the drain's short intervals pull the
  // steady state down.
  std::vector<double> ends;
  for (int i = 1; i <= 10; ++i) ends.push_back(i);
  for (int i = 1; i <= 4; ++i) ends.push_back(10 + 0.01 * i);
  const IterationStats s = iteration_stats(ends, 1, 4);
  EXPECT_DOUBLE_EQ(s.median_s, 1.0);
  EXPECT_DOUBLE_EQ(s.min_s, 1.0);
  EXPECT_DOUBLE_EQ(s.max_s, 1.0);
  EXPECT_LT(iteration_stats(ends, 1).min_s, 0.1);
}

}  // namespace
}  // namespace trainsim
