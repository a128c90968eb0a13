// The marks a lending device times its compute ops' work by
// (Device::time_work_of, RangeNetwork::mark): per op, one before its first
// range's work and one after its last, each op's turned into its times as
// soon as its work is done, so that only the marks of work in flight are
// held.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "exec/tensor/device.hpp"
#include "exec/tensor/range_network.hpp"

namespace trainsim {

class OpWorkMarks {
 public:
  // The op whose work comes next (-1: none); from the thread that queues
  // its work.
  void time(int64_t op) { op_ = op; }
  // Before and after a piece of that op's work on `network`, the waits
  // that order it after other work queued before `before`.
  void before(RangeNetwork& network);
  void after(RangeNetwork& network);
  // Every timed op's times; waits for their work.
  std::vector<Device::WorkTime> times();

 private:
  struct Span {
    int64_t op = -1;
    std::shared_ptr<WorkMark> start, end;
  };
  // The spans of ops before the current one into times_: those whose work
  // is done, or all of them with `wait`.
  void settle(bool wait);

  std::atomic<int64_t> op_{-1};
  std::deque<Span> open_;  // in the order the work was queued
  std::vector<Device::WorkTime> times_;
};

}  // namespace trainsim
