// Calls timed on several threads at once (profiles/profiler/timing.hpp):
// thread 0's own time, or the time until the last of them ends.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

// Thread 1 sleeps 200 ms, thread 0 returns at once: the calls together
// take the sleep (the makespan), thread 0's own call far less.
TEST(ConcurrentTiming, TheMakespanRunsToTheLastThreadsEnd) {
  const auto body = [](int64_t thread) {
    if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  EXPECT_GE(concurrent_makespan_median_s(2, 1, 3, body), 0.2);
  EXPECT_LT(concurrent_median_s(2, 1, 3, body), 0.2);
  // One thread: its own call.
  EXPECT_GE(concurrent_makespan_median_s(1, 0, 1,
                                         [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }),
            0.02);
}

// A thread's failure stops the measurement (the others do not wait for it) and comes back.
TEST(ConcurrentTiming, AThreadsFailureComesBackWithoutAHang) {
  EXPECT_THROW(concurrent_makespan_median_s(3, 1, 2,
                                            [](int64_t thread) {
                                              if (thread == 2) throw std::runtime_error("no GPU");
                                            }),
               std::runtime_error);
}

}  // namespace
}  // namespace trainsim
