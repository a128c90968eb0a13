// The timings of a run shared by several processes onto one clock: workers
// on endpoint 0's computer by their processes' starts on the shared
// monotonic clock, the others as the start barrier left them, and time 0
// the earliest start.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "exec/devices.hpp"
#include "exec/interpreter/scheduler.hpp"

namespace trainsim::interp {
namespace {

Plan three_workers_one_op_each() {
  Plan plan;
  plan.workers.resize(3);
  for (int32_t w = 0; w < 3; ++w) {
    Op op;
    op.worker = w;
    plan.ops.push_back(op);
  }
  return plan;
}

TEST(AlignTimings, WorkersOnTheSameComputerMoveByTheirStartsTheOthersStay) {
  const Plan plan = three_workers_one_op_each();
  // Each op 1 ms to 2 ms after its own process's start.
  std::vector<ExecOpTiming> timings(3, ExecOpTiming{0.001, 0.002});
  // Worker 1's process started 4 ms before endpoint 0's, worker 2's is on
  // another computer.
  align_timings(plan, {100.000, 99.996, std::numeric_limits<double>::quiet_NaN()}, timings);
  // Worker 1's start is time 0: its op 1-2 ms, endpoint 0's 5-6 ms, and
  // worker 2's where the barrier put it, beside endpoint 0's.
  EXPECT_NEAR(timings[1].start_s, 0.001, 1e-12);
  EXPECT_NEAR(timings[1].end_s, 0.002, 1e-12);
  EXPECT_NEAR(timings[0].start_s, 0.005, 1e-12);
  EXPECT_NEAR(timings[0].end_s, 0.006, 1e-12);
  EXPECT_NEAR(timings[2].start_s, 0.005, 1e-12);
  EXPECT_NEAR(timings[2].end_s, 0.006, 1e-12);
}

TEST(AlignTimings, LaterStartsMoveLaterAndEndpointZeroKeepsTimeZero) {
  const Plan plan = three_workers_one_op_each();
  std::vector<ExecOpTiming> timings(3, ExecOpTiming{0.0, 0.001});
  align_timings(plan, {50.0, 50.002, 50.0125}, timings);
  EXPECT_NEAR(timings[0].start_s, 0.0, 1e-12);
  EXPECT_NEAR(timings[1].start_s, 0.002, 1e-12);
  EXPECT_NEAR(timings[2].start_s, 0.0125, 1e-12);
  EXPECT_NEAR(timings[2].end_s, 0.0135, 1e-12);
}

// Cristian's algorithm by hand: exchanges of round trip 10, 20 and 4 s
// whose replies read 105, 130 and 158 on the other clock; the shortest, sent
// at 50 and back at 54, puts the other clock 158 - 52 = 106 s ahead.
TEST(ClockOffset, TakesTheExchangeWithTheShortestRoundTrip) {
  EXPECT_DOUBLE_EQ(clock_offset_s({{0, 105, 10}, {20, 130, 40}, {50, 158, 54}}), 106.0);
  EXPECT_DOUBLE_EQ(clock_offset_s({{10, 3, 12}}), -8.0);  // a clock behind this one
  EXPECT_EQ(clock_offset_s({}), 0.0);
}

// Another computer's start brought onto endpoint 0's clock by its offset
// lines its ops up as they ran. Worker 1's clock is 1000 s ahead: the
// exchange sent at 2.0 and back at 2.001 read 1002.0005 there. Worker 1
// started at 1002.002 on its clock, 2.002 on endpoint 0's, 2 ms after
// endpoint 0 and worker 2 (this computer): its op, 1 ms into its run, at 3 ms.
TEST(ClockOffset, PutsAnotherComputersStartOnEndpointZerosClock) {
  const Plan plan = three_workers_one_op_each();
  std::vector<ExecOpTiming> timings(3, ExecOpTiming{0.001, 0.002});
  const double offset = clock_offset_s({{2.0, 1002.0005, 2.001}});
  EXPECT_NEAR(offset, 1000.0, 1e-9);
  align_timings(plan, {2.0, 1002.002 - offset, 2.0}, timings);
  EXPECT_NEAR(timings[1].start_s, 0.003, 1e-9);
  EXPECT_NEAR(timings[0].start_s, 0.001, 1e-9);
  EXPECT_NEAR(timings[2].start_s, 0.001, 1e-9);
}

// The boot id the processes compare: the kernel's UUID, one line.
TEST(ComputerId, IsTheKernelsBootUuid) {
  const std::string id = computer_id();
  ASSERT_EQ(id.size(), 36u) << "/proc/sys/kernel/random/boot_id read as '" << id << "'";
  EXPECT_EQ(id[8], '-');
  EXPECT_EQ(id.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace trainsim::interp
