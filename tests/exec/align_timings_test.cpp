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

// The boot id the processes compare: the kernel's UUID, one line.
TEST(ComputerId, IsTheKernelsBootUuid) {
  const std::string id = computer_id();
  ASSERT_EQ(id.size(), 36u) << "/proc/sys/kernel/random/boot_id read as '" << id << "'";
  EXPECT_EQ(id[8], '-');
  EXPECT_EQ(id.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace trainsim::interp
