// The process's start cores: a thread the executor pinned to one core
// widened to them, and back to its pin after a scope (OnProcessCores, which
// NCCL's communicators are made under, so its threads keep to the process's
// cores, not their maker's one).
#include "exec/process_cores.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "exec/interpreter.hpp"

namespace trainsim {
namespace {

int cores_of_this_thread() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  return sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : -1;
}

TEST(ProcessCores, AScopeWidensAPinnedThreadAndTheThreadsItMakesThenGivesThePinBack) {
  const int64_t cores = process_start_cores();
  EXPECT_EQ(cores, usable_cores());  // this test's main thread is not pinned
  if (cores < 2) GTEST_SKIP() << "one core: nothing to pin apart";
  bool pinned = false;
  int before = 0, inside = 0, after = 0, widened = 0;
  std::thread worker([&] {
    pinned = pin_current_thread(1);
    if (!pinned) return;
    before = cores_of_this_thread();
    {
      const OnProcessCores unpinned;
      inside = cores_of_this_thread();
      std::thread made([&] { widened = cores_of_this_thread(); });  // a library's thread, made meanwhile
      made.join();
    }
    after = cores_of_this_thread();
  });
  worker.join();
  if (!pinned) GTEST_SKIP() << "this machine does not let a thread be pinned";
  EXPECT_EQ(before, 1);
  EXPECT_EQ(inside, cores);
  EXPECT_EQ(widened, cores);
  EXPECT_EQ(after, 1);
}

TEST(ProcessCores, APinnedThreadRunsOnThemAgainWhenAsked) {
  const int64_t cores = process_start_cores();
  if (cores < 2) GTEST_SKIP() << "one core: nothing to pin apart";
  bool pinned = false, widened = false;
  int count = 0;
  std::thread worker([&] {
    pinned = pin_current_thread(0);
    if (!pinned) return;
    widened = run_on_process_cores();
    count = cores_of_this_thread();
  });
  worker.join();
  if (!pinned) GTEST_SKIP() << "this machine does not let a thread be pinned";
  EXPECT_TRUE(widened);
  EXPECT_EQ(count, cores);
}

}  // namespace
}  // namespace trainsim
