// The median's order-statistic interval on hand-computed cases, and the
// capacity probe's basic sense.
#include "profiles/profiler/spread.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace trainsim {
namespace {

TEST(MedianInterval, FiveSamplesNeedTheirWholeRangeForNinetyPercent) {
  // n = 5: [x(1), x(5)] misses the median only when all five fall on one
  // side, 2 / 32: coverage 30/32 = 0.9375; [x(2), x(4)] would cover
  // 1 - 2(1 + 5)/32 = 0.625 only.
  const MedianInterval m = median_interval({1.10, 0.90, 1.00, 1.05, 0.98}, 0.9);
  EXPECT_EQ(m.samples, 5);
  EXPECT_DOUBLE_EQ(m.median, 1.00);
  EXPECT_DOUBLE_EQ(m.low, 0.90);
  EXPECT_DOUBLE_EQ(m.high, 1.10);
  EXPECT_NEAR(m.coverage, 30.0 / 32, 1e-12);
  EXPECT_NEAR(m.relative_half_width, 0.10, 1e-12);
}

TEST(MedianInterval, TenSamplesDropTheOuterPairAtNinetyPercent) {
  // n = 10: k = 2 covers 1 - 2(1 + 10)/1024 = 0.978515625; k = 3 would cover
  // 1 - 2(1 + 10 + 45)/1024 = 0.890625 < 0.9.
  const MedianInterval m = median_interval({10, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.9);
  EXPECT_DOUBLE_EQ(m.median, 5.5);
  EXPECT_DOUBLE_EQ(m.low, 2);
  EXPECT_DOUBLE_EQ(m.high, 9);
  EXPECT_NEAR(m.coverage, 1 - 22.0 / 1024, 1e-12);
  EXPECT_NEAR(m.relative_half_width, 3.5 / 5.5, 1e-12);
  // At 85% the narrower k = 3 qualifies.
  const MedianInterval narrower = median_interval({10, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.85);
  EXPECT_DOUBLE_EQ(narrower.low, 3);
  EXPECT_NEAR(narrower.coverage, 1 - 112.0 / 1024, 1e-12);
}

TEST(MedianInterval, TooFewSamplesSayTheirLowerCoverage) {
  // n = 3: [min, max] covers 1 - 2/8 = 0.75 only, below the 90% asked.
  const MedianInterval m = median_interval({3, 1, 2}, 0.9);
  EXPECT_DOUBLE_EQ(m.low, 1);
  EXPECT_DOUBLE_EQ(m.high, 3);
  EXPECT_NEAR(m.coverage, 0.75, 1e-12);
  const MedianInterval one = median_interval({2}, 0.9);
  EXPECT_EQ(one.coverage, 0);
  EXPECT_TRUE(std::isinf(one.relative_half_width));
  EXPECT_EQ(median_interval({}, 0.9).samples, 0);
}

TEST(MedianInterval, LargeCountsDoNotOverflow) {
  std::vector<double> samples;
  for (int i = 0; i < 2001; ++i) samples.push_back(i);
  const MedianInterval m = median_interval(samples, 0.95);
  EXPECT_DOUBLE_EQ(m.median, 1000);
  // The normal approximation: half-width about 1.96·sqrt(n)/2 = 43.8 ranks.
  EXPECT_NEAR(m.high - m.median, 44, 2);
  EXPECT_GE(m.coverage, 0.95);
}

TEST(CapacityProbe, TakesPositiveTimeOnOneAndTwoThreads) {
  const double one = capacity_probe_s(1, 1);
  const double two = capacity_probe_s(2, 1);
  EXPECT_GT(one, 0);
  EXPECT_GT(two, 0);
  EXPECT_LT(one, 10);
}

}  // namespace
}  // namespace trainsim
