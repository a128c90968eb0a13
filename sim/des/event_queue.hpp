// Inside sim/des: the engine's future events, earliest (time, sequence)
// first, so ties run in push order and a run repeats exactly. A 4-ary heap
// keyed by one 128-bit integer (time above, sequence below), so a sift picks
// the earliest child with comparisons and no branch (the choice is a coin
// flip a branch predictor loses), plus a queue of the events due at the
// current time (a receive ending with its send, a collective of no
// duration), which skip the heap: they are pushed in (time, sequence) order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/des/engine.hpp"

namespace trainsim::des_detail {

__extension__ typedef unsigned __int128 EventKey;  // compared in two instructions, without a branch

struct Event {
  EventKey key;  // time (ns, >= 0) in the high half, push sequence in the low half
  OpId op;
  uint32_t tag;  // the engine's EventKind in the low 2 bits, a version above
  SimTime time_ns() const { return static_cast<SimTime>(key >> 64); }
};

class EventQueue {
 public:
  bool empty() const { return heap_.empty() && due_next_ == due_.size(); }

  // An event at or after `now_ns`, the time of the last event taken.
  void push(SimTime time_ns, SimTime now_ns, OpId op, uint32_t tag) {
    const Event event{(static_cast<EventKey>(time_ns) << 64) | sequence_++, op, tag};
    if (time_ns == now_ns) {
      due_.push_back(event);
    } else {
      sift_up(event);
    }
  }

  // The earliest event; the queue must not be empty.
  Event pop() {
    if (due_next_ < due_.size() && (heap_.empty() || earlier(due_[due_next_], heap_.front()))) {
      const Event event = due_[due_next_++];
      if (due_next_ == due_.size()) {
        due_.clear();
        due_next_ = 0;
      }
      return event;
    }
    return pop_heap();
  }

 private:
  static bool earlier(const Event& a, const Event& b) {
    return a.key < b.key;
  }

  static constexpr size_t kArity = 4;

  void sift_up(const Event& event) {
    heap_.push_back(event);
    rise(heap_.size() - 1, event);
  }

  // Fills the hole at `hole` with `event`, moving later parents down.
  void rise(size_t hole, const Event& event) {
    while (hole > 0) {
      const size_t parent = (hole - 1) / kArity;
      if (!earlier(event, heap_[parent])) break;
      heap_[hole] = heap_[parent];
      hole = parent;
    }
    heap_[hole] = event;
  }

  // The top leaves a hole that walks down to a leaf along the earliest
  // children (the earliest of four found by two independent comparisons and
  // a third, no branch); the last event then fills it, rising as far as it
  // must (rarely more than a level, since it came from the bottom).
  Event pop_heap() {
    const Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return top;
    size_t hole = 0;
    for (size_t first = 1; first < n; first = kArity * hole + 1) {
      size_t child = first;
      if (first + 3 < n) {
        const size_t a = first + static_cast<size_t>(earlier(heap_[first + 1], heap_[first]));
        const size_t b = first + 2 + static_cast<size_t>(earlier(heap_[first + 3], heap_[first + 2]));
        child = earlier(heap_[b], heap_[a]) ? b : a;
      } else {
        for (size_t k = first + 1; k < n; ++k) child = earlier(heap_[k], heap_[child]) ? k : child;
      }
      heap_[hole] = heap_[child];
      hole = child;
    }
    rise(hole, last);
    return top;
  }

  std::vector<Event> heap_;
  std::vector<Event> due_;  // events at the current time, in push order
  size_t due_next_ = 0;
  uint64_t sequence_ = 0;
};

}  // namespace trainsim::des_detail
