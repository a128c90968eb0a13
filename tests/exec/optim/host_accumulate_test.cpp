// CGDP host accumulation: the threaded sum equals the serial worker-by-worker
// sum bit for bit whatever the thread count, and the broadcast copies it back.
#include "exec/optim/host_accumulate.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exec/interpreter.hpp"

namespace trainsim {
namespace {

std::vector<std::span<const float>> const_views(const std::vector<std::vector<float>>& workers) {
  return {workers.begin(), workers.end()};
}

TEST(HostAccumulate, ThreadRangesAreContiguousAndBalanced) {
  // 7 elements over 3 threads: 7 = 3 + 2 + 2 -> [0,3), [3,5), [5,7).
  EXPECT_EQ(host_thread_range(7, 3, 0), std::make_pair(int64_t{0}, int64_t{3}));
  EXPECT_EQ(host_thread_range(7, 3, 1), std::make_pair(int64_t{3}, int64_t{5}));
  EXPECT_EQ(host_thread_range(7, 3, 2), std::make_pair(int64_t{5}, int64_t{7}));
  // More threads than elements: the last ones are empty.
  EXPECT_EQ(host_thread_range(2, 3, 2), std::make_pair(int64_t{2}, int64_t{2}));
}

TEST(HostAccumulate, SumsThreeWorkersByHand) {
  // {1,2,3} + {10,20,30} + {100,200,300} = {111, 222, 333}.
  const std::vector<std::vector<float>> workers = {{1, 2, 3}, {10, 20, 30}, {100, 200, 300}};
  std::vector<float> sum(3);
  host_accumulate(const_views(workers), sum, 2);
  EXPECT_EQ(sum, (std::vector<float>{111, 222, 333}));
}

TEST(HostAccumulate, SumsWorkerByWorkerInOrder) {
  // Float addition is not associative: 1e8 + 1 rounds back to 1e8 (the float
  // spacing at 1e8 is 8), so worker order 0, 1, 2 gives (1e8 + 1) − 1e8 = 0,
  // whereas 1e8 − 1e8 + 1 would give 1. Every thread count must give 0.
  const std::vector<std::vector<float>> workers = {{1e8f, 1e8f, 1e8f}, {1.0f, 1.0f, 1.0f}, {-1e8f, -1e8f, -1e8f}};
  for (int64_t threads = 1; threads <= 4; ++threads) {
    std::vector<float> sum(3, -5.0f);
    host_accumulate(const_views(workers), sum, threads);
    EXPECT_EQ(sum, (std::vector<float>{0.0f, 0.0f, 0.0f})) << threads << " threads";
  }
}

TEST(HostAccumulate, EqualsTheSerialSumForOneTwoAndThreeThreads) {
  // 4 workers x 1001 random values of mixed magnitude; the reference is the
  // plain serial loop in worker order. Values are derived from the engine's bits.
  std::mt19937_64 engine(2024);
  std::vector<std::vector<float>> workers(4, std::vector<float>(1001));
  for (auto& chunk : workers) {
    for (float& value : chunk) {
      const uint64_t bits = engine();
      value = std::ldexp(static_cast<float>(static_cast<int32_t>(bits >> 40) - (1 << 23)), -static_cast<int>(bits & 31));
    }
  }
  std::vector<float> serial(1001, 0.0f);
  for (size_t i = 0; i < serial.size(); ++i) {
    serial[i] = workers[0][i];
    for (size_t w = 1; w < workers.size(); ++w) serial[i] += workers[w][i];
  }
  for (int64_t threads = 1; threads <= 3; ++threads) {
    std::vector<float> sum(1001);
    host_accumulate(const_views(workers), sum, threads);
    EXPECT_EQ(sum, serial) << threads << " threads";
  }
}

TEST(HostAccumulate, TheScaledSumIsTheSumScaledAfterwardsBitForBit) {
  // 3 workers x 10,000 values (blocks of 4,096 and a partial one), scale 1/3:
  // each element equals the serial sum multiplied by the scale afterwards.
  std::mt19937_64 engine(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<std::vector<float>> workers(3, std::vector<float>(10000));
  for (auto& chunk : workers) {
    for (float& v : chunk) v = value(engine);
  }
  const float scale = 1.0f / 3.0f;
  std::vector<float> expected(10000);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = ((workers[0][i] + workers[1][i]) + workers[2][i]) * scale;
  for (int64_t threads = 1; threads <= 3; ++threads) {
    std::vector<float> mean(10000);
    host_accumulate(const_views(workers), mean, threads, scale);
    EXPECT_EQ(mean, expected) << threads << " threads";
  }
}

TEST(HostAccumulate, BroadcastGivesEveryWorkerTheSum) {
  std::vector<std::vector<float>> workers = {{1, 2}, {3, 4}};
  std::vector<float> sum(2);
  host_accumulate(const_views(workers), sum, 2);
  std::vector<std::span<float>> views(workers.begin(), workers.end());
  broadcast_from_host(sum, views);
  EXPECT_EQ(workers[0], (std::vector<float>{4, 6}));
  EXPECT_EQ(workers[1], (std::vector<float>{4, 6}));
}

}  // namespace
// The threads kept between sums: calls of 1 to 4 threads in turns, from two
// callers at once, each sum the serial loop's bit for bit.
TEST(HostAccumulate, KeptThreadsSumAsTheSerialLoopAcrossCallsAndCallers) {
  const auto check = [](uint64_t seed, std::vector<std::string>& failures) {
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<std::vector<float>> workers(3, std::vector<float>(3001));
    for (auto& chunk : workers) {
      for (float& v : chunk) v = value(engine);
    }
    std::vector<float> serial(3001);
    for (size_t i = 0; i < serial.size(); ++i) serial[i] = workers[0][i] + workers[1][i] + workers[2][i];
    for (int call = 0; call < 40; ++call) {
      std::vector<float> sum(3001, -1.0f);
      host_accumulate(const_views(workers), sum, 1 + call % 4);
      if (sum != serial) failures.push_back("seed " + std::to_string(seed) + ", call " + std::to_string(call));
    }
  };
  std::vector<std::string> first, second;
  std::thread other([&] { check(11, second); });
  check(12, first);
  other.join();
  EXPECT_TRUE(first.empty()) << first.front();
  EXPECT_TRUE(second.empty()) << second.front();
}

TEST(HostAccumulate, TakesAThreadPerShareUpToTheProcesssCores) {
  const int64_t cores = usable_cores();
  EXPECT_EQ(host_sum_threads(0), 1);
  EXPECT_EQ(host_sum_threads(kFloatsPerHostThread - 1), 1);
  EXPECT_EQ(host_sum_threads(2 * kFloatsPerHostThread), std::min<int64_t>(2, cores));
  EXPECT_EQ(host_sum_threads(1000 * kFloatsPerHostThread), cores);
}

// The executor pins each stream's thread to one core; the kept threads one
// of them makes may still run on every core of the process, or its
// accumulation would take turns on that core.
TEST(HostAccumulate, KeptThreadsRunOnEveryCoreWhateverCoreTheirMakerIsPinnedTo) {
  const int64_t cores = usable_cores();
  if (cores < 2) GTEST_SKIP() << "one core: nothing to pin apart";
  constexpr int kThreads = 64;  // more than any other test keeps, so these are made by the pinned thread
  std::vector<int> allowed(kThreads, 0);
  bool pinned = false;
  std::thread maker([&] {
    pinned = pin_current_thread(0);
    if (!pinned) return;
    run_on_host_threads(kThreads, [&](int64_t index) {
      cpu_set_t mask;
      CPU_ZERO(&mask);
      if (sched_getaffinity(0, sizeof mask, &mask) == 0) allowed[static_cast<size_t>(index)] = CPU_COUNT(&mask);
    });
  });
  maker.join();
  if (!pinned) GTEST_SKIP() << "this machine does not let a thread be pinned";
  EXPECT_EQ(allowed[0], 1);  // the caller, on its own core
  for (int i = 1; i < kThreads; ++i) EXPECT_EQ(allowed[static_cast<size_t>(i)], cores) << "kept thread " << i;
}

TEST(HostAccumulate, ARunRethrowsATasksExceptionOnceAllAreDoneAndTheThreadsServeTheNext) {
  std::vector<int> ran(3, 0);
  EXPECT_THROW(run_on_host_threads(3,
                                   [&](int64_t index) {
                                     ran[static_cast<size_t>(index)] = 1;
                                     if (index == 2) throw std::runtime_error("a task failed");
                                   }),
               std::runtime_error);
  EXPECT_EQ(ran, (std::vector<int>{1, 1, 1}));
  std::vector<int> again(3, 0);
  run_on_host_threads(3, [&](int64_t index) { again[static_cast<size_t>(index)] = 1; });
  EXPECT_EQ(again, (std::vector<int>{1, 1, 1}));
}

}  // namespace trainsim
