// The simulator's event queue against the order it promises: earliest time
// first, ties in push order, events due now (pushed at the current time)
// after the heap's events of the same time that were pushed before them.
// Random pushes and pops, checked against a sort of (time, sequence).
#include "sim/des/event_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>

namespace trainsim::des_detail {
namespace {

TEST(EventQueue, TiesRunInPushOrder) {
  EventQueue queue;
  for (OpId op = 0; op < 9; ++op) queue.push(op % 3 == 0 ? 20 : 10, 0, op, 0);
  std::vector<OpId> order;
  while (!queue.empty()) order.push_back(queue.pop().op);
  EXPECT_EQ(order, (std::vector<OpId>{1, 2, 4, 5, 7, 8, 0, 3, 6}));
}

TEST(EventQueue, EventsDueNowFollowTheHeapsEventsOfTheSameTime) {
  EventQueue queue;
  queue.push(5, 0, 0, 0);
  queue.push(5, 0, 1, 0);
  EXPECT_EQ(queue.pop().op, 0);  // now is 5
  queue.push(5, 5, 2, 0);        // due now, pushed after op 1
  queue.push(6, 5, 3, 0);
  EXPECT_EQ(queue.pop().op, 1);
  EXPECT_EQ(queue.pop().op, 2);
  EXPECT_EQ(queue.pop().op, 3);
  EXPECT_TRUE(queue.empty());
}

// A simulation's use: pops interleaved with pushes at or after the time
// popped last, times drawn from a few values so ties are common, up to a few
// hundred events held; the tag carries through.
TEST(EventQueue, RandomPushesAndPopsComeOutInTimeThenPushOrder) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    EventQueue queue;
    std::set<std::tuple<SimTime, uint64_t, OpId>> expected;  // (time, push order, op)
    uint64_t pushed = 0;
    SimTime now = 0;
    const int spread = 1 + round * 3;
    for (int step = 0; step < 20000; ++step) {
      const bool push = expected.empty() || (rng() % 100) < (expected.size() < 300 ? 55u : 45u);
      if (push) {
        const SimTime time = now + static_cast<SimTime>(rng() % spread);
        const auto op = static_cast<OpId>(rng() % 1000);
        queue.push(time, now, op, static_cast<uint32_t>(op) * 4 + 1);
        expected.insert({time, pushed++, op});
        continue;
      }
      ASSERT_FALSE(queue.empty());
      const Event event = queue.pop();
      const auto [time, order, op] = *expected.begin();
      expected.erase(expected.begin());
      ASSERT_EQ(event.time_ns(), time) << "round " << round << " step " << step;
      ASSERT_EQ(event.op, op) << "round " << round << " step " << step;
      ASSERT_EQ(event.tag, static_cast<uint32_t>(op) * 4 + 1);
      now = time;
    }
    while (!expected.empty()) {
      ASSERT_EQ(queue.pop().op, std::get<2>(*expected.begin()));
      expected.erase(expected.begin());
    }
    EXPECT_TRUE(queue.empty());
  }
}

TEST(EventQueue, TimesUpToTheClocksEndOrderCorrectly) {
  EventQueue queue;
  const SimTime late = INT64_MAX;
  queue.push(late, 0, 0, 0);
  queue.push(late - 1, 0, 1, 0);
  queue.push(1, 0, 2, 0);
  EXPECT_EQ(queue.pop().op, 2);
  EXPECT_EQ(queue.pop().op, 1);
  const Event last = queue.pop();
  EXPECT_EQ(last.op, 0);
  EXPECT_EQ(last.time_ns(), late);
}

}  // namespace
}  // namespace trainsim::des_detail
