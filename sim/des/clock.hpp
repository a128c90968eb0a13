// Inside sim/des: the simulator's clock. Time is a count of nanoseconds in a
// signed 64-bit integer, so a run spans at most 2^63 − 1 ns, about 292 years.
// Every duration enters the clock through duration_ns and every event time
// through later_ns; past that range they throw ClockOverflow, which the engine
// turns into an InputError naming the op, instead of wrapping around to a
// negative time.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/error.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {

inline constexpr double kNsPerS = 1e9;

// A time that does not fit the clock: the seconds it would have been and the
// op it belongs to (-1 if none).
struct ClockOverflow {
  double seconds = 0;
  OpId op = -1;
};

// A whole number of nanoseconds (>= 0), held as a double, on the clock.
inline SimTime to_clock_ns(double whole_ns, OpId op) {
  TRAINSIM_CHECK(!(whole_ns < 0), "a negative duration in the simulator");
  if (!(whole_ns < 0x1p63)) throw ClockOverflow{whole_ns / kNsPerS, op};  // also NaN: huge factors multiplied
  return static_cast<SimTime>(whole_ns);
}

// std::round (halves away from zero), inline for the values a clock takes:
// below 2^52 the integer part and the fraction are exact in a double.
// Anything else (negative, huge, NaN) goes to std::round.
inline double round_ns(double ns) {
  if (!(ns >= 0 && ns < 0x1p52)) return std::round(ns);
  const auto whole = static_cast<double>(static_cast<int64_t>(ns));
  return ns - whole >= 0.5 ? whole + 1 : whole;
}

// `seconds` (>= 0) rounded to the clock's nanoseconds.
inline SimTime duration_ns(double seconds, OpId op) { return to_clock_ns(round_ns(seconds * kNsPerS), op); }

// now + duration, both on the clock.
inline SimTime later_ns(SimTime now_ns, SimTime duration, OpId op) {
  SimTime sum = 0;
  if (__builtin_add_overflow(now_ns, duration, &sum)) {
    throw ClockOverflow{(static_cast<double>(now_ns) + static_cast<double>(duration)) / kNsPerS, op};
  }
  return sum;
}

}  // namespace trainsim
