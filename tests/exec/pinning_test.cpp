// Worker threads pinned to cores: the calling thread ends up allowed on
// exactly one of the cores it was allowed on before.
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "exec/interpreter.hpp"

namespace trainsim {
namespace {

TEST(PinCurrentThread, LeavesTheThreadOnOneAllowedCore) {
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const int cores = CPU_COUNT(&before);
  // A fresh thread, so the test runner's own affinity is left alone.
  std::thread([&] {
    ASSERT_TRUE(pin_current_thread(cores + 1));  // wraps around: the second allowed core (or the only one)
    cpu_set_t after;
    CPU_ZERO(&after);
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_EQ(CPU_COUNT(&after), 1);
    int pinned = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &after)) pinned = cpu;
    }
    ASSERT_GE(pinned, 0);
    EXPECT_TRUE(CPU_ISSET(pinned, &before));
    // The (cores + 1) mod cores = 1st allowed core in order, counting from 0.
    int index = 0;
    for (int cpu = 0; cpu < pinned; ++cpu) index += CPU_ISSET(cpu, &before) ? 1 : 0;
    EXPECT_EQ(index, (cores + 1) % cores);
  }).join();
}

}  // namespace
}  // namespace trainsim
