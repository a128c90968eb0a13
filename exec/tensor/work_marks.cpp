#include "exec/tensor/work_marks.hpp"

namespace trainsim {

void OpWorkMarks::before(RangeNetwork& network) {
  if (op_ < 0) return;
  settle(false);
  if (!open_.empty() && open_.back().op == op_) return;  // a later piece of the op: its start stands
  std::shared_ptr<WorkMark> start = network.mark();
  if (start != nullptr) open_.push_back(Span{op_, std::move(start), nullptr});
}

void OpWorkMarks::after(RangeNetwork& network) {
  if (op_ < 0 || open_.empty() || open_.back().op != op_) return;
  std::shared_ptr<WorkMark> end = network.mark();
  if (end != nullptr) open_.back().end = std::move(end);
}

std::vector<Device::WorkTime> OpWorkMarks::times() {
  op_ = -1;
  settle(true);
  return times_;
}

void OpWorkMarks::settle(bool wait) {
  while (!open_.empty()) {
    Span& s = open_.front();
    if (s.op == op_) break;  // the op under way may queue more
    if (s.end != nullptr) {
      if (!wait && !s.end->done()) break;  // its work, and so the later ops', still under way
      const double start_s = s.start->done_s();
      times_.push_back(Device::WorkTime{s.op, start_s, start_s + s.end->seconds_since(*s.start)});
    }
    open_.pop_front();
  }
}

}  // namespace trainsim
