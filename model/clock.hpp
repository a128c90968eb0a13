// The computer's monotonic clock (std::chrono::steady_clock) in seconds
// since its arbitrary origin: one reading every process on the computer
// shares, for stopwatches and for placing processes' timings on one clock.
#pragma once

#include <chrono>

namespace trainsim {

inline double monotonic_clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace trainsim
