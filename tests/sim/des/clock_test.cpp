// The simulator's 64-bit nanosecond clock under absurd durations: a run that
// passes its range (2^63 ns, about 292 years) is an InputError naming the op,
// never a time that wraps around to a negative or smaller value; the
// straggler slowdown is bounded; the steady state leaves a plan's drain out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "model/error.hpp"
#include "sim/des/clock.hpp"
#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::send_op;
using testing_fixtures::recv_op;
using testing_fixtures::simple_cluster;

// The InputError message simulate_plan throws, or "" when it does not throw.
std::string clock_error(const Plan& plan, const Cluster& cluster, const SimOptions& options = {}) {
  try {
    simulate_plan(plan, cluster, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The clock's inline rounding is std::round everywhere: halves away from
// zero, the largest double below 0.5, the edge of exact integers (2^52),
// beyond it, and negative, infinite and NaN values (which the clock rejects).
TEST(Clock, InlineRoundingAgreesWithStdRound) {
  const double cases[] = {0.0, 0.5, 1.5, 2.5, 0.49999999999999994, 1e-300, 3.0, 123456789.5, 0x1p52 - 0.5,
                          0x1p52, 0x1p52 + 1, 0x1p53, 1e300, -0.5, -2.5, -1e-3,
                          std::numeric_limits<double>::infinity()};
  for (double x : cases) EXPECT_EQ(round_ns(x), std::round(x)) << x;
  EXPECT_TRUE(std::isnan(round_ns(std::numeric_limits<double>::quiet_NaN())));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-3, 16);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::pow(10.0, exponent(rng));
    ASSERT_EQ(round_ns(x), std::round(x)) << x;
  }
}

TEST(Clock, AComputeOpLongerThanTheClockRangeIsAnErrorNamingTheOp) {
  PlanBuilder b("test", 1, 1, 1);
  b.add(compute_op(0, 1e-3));
  b.add(compute_op(0, 1e10));  // 317 years
  const std::string message = clock_error(std::move(b).build(), simple_cluster(1, 1));
  EXPECT_NE(message.find("op 1 (forward, worker 0, iteration 0)"), std::string::npos) << message;
  EXPECT_NE(message.find("292 years"), std::string::npos) << message;
}

TEST(Clock, OpsThatFitAloneButNotInSequenceAreAnErrorNotANegativeTime) {
  // Each 5e9 s fits the clock (9.2e9 s); the second ends at 1e10 s, which would wrap around.
  PlanBuilder b("test", 1, 2, 1);
  b.add(compute_op(0, 5e9, {}, 0));
  b.add(compute_op(0, 5e9, {}, 1));
  const std::string message = clock_error(std::move(b).build(), simple_cluster(1, 1));
  EXPECT_NE(message.find("op 1 "), std::string::npos) << message;
  EXPECT_NE(message.find("past the simulator's clock"), std::string::npos) << message;
}

TEST(Clock, ATransferTooLargeForTheClockIsAnError) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId send = b.add(send_op(0, 1, 1e30));  // 1e20 s at 10 GB/s
  b.add(recv_op(1, 0, send));
  const std::string message = clock_error(std::move(b).build(), simple_cluster(1, 2));
  EXPECT_NE(message.find("op 0 (send"), std::string::npos) << message;
}

TEST(Clock, TheLargestStragglerSlowdownOfAnOrdinaryRunStaysPositiveAndSlower) {
  PlanBuilder b("test", 1, 10, 1);
  for (int32_t i = 0; i < 10; ++i) b.add(compute_op(0, 1e-3, {}, i));
  const Plan plan = std::move(b).build();
  const Cluster cluster = simple_cluster(1, 1);
  SimOptions slow;
  slow.straggler_probability = 1;
  slow.straggler_slowdown = kMaxStragglerSlowdown;
  const SimResult r = simulate_plan(plan, cluster, slow);
  EXPECT_DOUBLE_EQ(r.iteration_s, 1e-3 * kMaxStragglerSlowdown);
  EXPECT_GT(r.iteration_s, simulate_plan(plan, cluster, {}).iteration_s);
}

TEST(Clock, AStragglerSlowdownAboveTheLimitOrNotANumberIsRejected) {
  PlanBuilder b("test", 1, 1, 1);
  b.add(compute_op(0, 1e-3));
  const Plan plan = std::move(b).build();
  for (double slowdown : {1e11, 1e308, std::numeric_limits<double>::quiet_NaN()}) {
    SimOptions options;
    options.straggler_probability = 0.5;
    options.straggler_slowdown = slowdown;
    EXPECT_NE(clock_error(plan, simple_cluster(1, 1), options).find("--straggler"), std::string::npos) << slowdown;
  }
}

TEST(Clock, AnIterationShorterThanANanosecondIsAnErrorNotInfiniteSamplesPerSecond) {
  PlanBuilder b("test", 1, 4, 1);
  for (int32_t i = 0; i < 4; ++i) b.add(compute_op(0, 1e-12, {}, i));
  const std::string message = clock_error(std::move(b).build(), simple_cluster(1, 1));
  EXPECT_NE(message.find("under 1 ns"), std::string::npos) << message;
}

TEST(SteadyState, IterationsEndingInThePlansDrainAreLeftOut) {
  // Iterations end every 10 s, but the last five all within 1.5 s in a drain.
  const std::vector<double> end_s = {10, 20, 30, 40, 40.3, 40.6, 40.9, 41.2, 41.5};
  EXPECT_LT(steady_state(end_s, 1, 1).iteration_s, 1);  // counted, the drain is the median
  const SteadyState s = steady_state(end_s, 1, 1, 5);
  EXPECT_DOUBLE_EQ(s.iteration_s, 10);
  EXPECT_DOUBLE_EQ(s.min_s, 10);
}

TEST(SteadyState, APlanWhoseDrainLeavesFewerThanTwoIterationsIsRejected) {
  PlanBuilder b("test", 1, 5, 1);
  for (int32_t i = 0; i < 5; ++i) b.add(compute_op(0, 1e-3, {}, i));
  b.set_drain_iterations(4);
  const std::string message = clock_error(std::move(b).build(), simple_cluster(1, 1));
  EXPECT_NE(message.find("--iterations"), std::string::npos) << message;
  EXPECT_NE(message.find("at least 6 iterations"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainsim
