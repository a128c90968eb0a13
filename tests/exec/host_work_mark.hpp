// A mark of work done by the time the call that queued it returns (the CPU
// stand-in networks'): done at once, at the host's clock when made, so an
// op's work timed with these lies within the op.
#pragma once

#include "exec/tensor/range_network.hpp"
#include "model/clock.hpp"

namespace trainsim::buffered {

struct HostWorkMark final : WorkMark {
  double at_s = monotonic_clock_s();
  bool done() override { return true; }
  double done_s() override { return at_s; }
  double seconds_since(WorkMark& earlier) override { return at_s - earlier.done_s(); }
};

}  // namespace trainsim::buffered
