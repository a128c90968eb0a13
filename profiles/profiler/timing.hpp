// Small helpers the measuring profiler shares: a monotonic stopwatch, the
// median of repeated timings, and what this machine says about itself
// (/proc/cpuinfo, /proc/meminfo).
#pragma once

#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/clock.hpp"

namespace trainsim {

// Seconds since an arbitrary origin (std::chrono::steady_clock).
inline double now_s() { return monotonic_clock_s(); }

// The median of `samples_s` (mean of the two middle values for an even
// count); 0 for none.
double median_s(std::vector<double> samples_s);

// Keeps the calling thread busy for `seconds` (work the probes stand in for,
// during which the other threads fall asleep).
inline void spin_for_s(double seconds) {
  const double until_s = now_s() + seconds;
  while (now_s() < until_s) {
  }
}

// The CPU's "model name" from /proc/cpuinfo, or the machine architecture
// (uname) where that file has none.
std::string cpu_model_name();

// MemTotal from /proc/meminfo in bytes, or sysinfo's total RAM; 0 if neither.
double total_memory_bytes();

// Runs body(thread, repeat) on `threads` threads at once: a warm-up phase of
// `warmups` calls, then `repeats` timed calls, every thread starting each call
// together (a barrier), so each timing includes the others' contention.
// Returns the median seconds of thread 0's timed calls. The first exception
// of any thread is rethrown after all have stopped.
double concurrent_median_s(int64_t threads, int64_t warmups, int64_t repeats,
                           const std::function<void(int64_t thread)>& body);
// As concurrent_median_s, each timed call's seconds from the common start to
// the last thread's end: the time `threads` calls at once take together
// (where they do not end together, thread 0's alone says little of it).
double concurrent_makespan_median_s(int64_t threads, int64_t warmups, int64_t repeats,
                                    const std::function<void(int64_t thread)>& body);

// The most threads one measurement or run may start: 4 per core of this
// machine, and never more than kMaxWorkerThreads (past that, threads only
// cost memory: each holds its own copy of the network and its buffers).
inline constexpr int64_t kMaxWorkerThreads = 1024;
int64_t max_worker_threads();

// Runs body(thread, sync) on `threads` threads and joins them; `sync` is a
// barrier over all of them. A thread that throws drops out of the barrier so
// the others do not wait for it; the first exception is rethrown after join.
// The bodies start only once every thread exists: if the system refuses a
// thread, none runs, the started ones are joined, and a std::runtime_error
// says so.
void run_threads(int64_t threads, const std::function<void(int64_t thread, std::barrier<>& sync)>& body);

}  // namespace trainsim
