// CGDP's host-side accumulation (seed 003 §3.1 steps B-4-2 / B-4-3, cost in
// §3.2; docs/equations.md §7): the N workers' copies of a chunk's gradients are
// summed into one host buffer by T host threads, and the sum is broadcast
// back to every worker. The sum does not depend on T: each element is summed
// worker 0, 1, ..., N−1 in that order whichever thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>

namespace trainsim {

// The element range [begin, end) thread `index` of `threads` owns in a buffer
// of `count` elements: contiguous, in order, sizes differing by at most one
// (the first count % threads ranges are one longer).
std::pair<int64_t, int64_t> host_thread_range(int64_t count, int64_t threads, int64_t index);

// host_sum[i] = (Σ_w worker_chunks[w][i]) · scale, w ascending, computed by
// `threads` host threads (the calling thread takes range 0, threads kept
// between calls the others) in one pass over the chunks (scale 1/N gives the mean: the same bits as the
// sum scaled afterwards). Every chunk must have host_sum.size() elements;
// threads >= 1 (more threads than elements leaves the extra ones idle).
void host_accumulate(std::span<const std::span<const float>> worker_chunks, std::span<float> host_sum,
                     int64_t threads, float scale = 1.0f);

// The threads a sum of `floats` per worker takes: one per this many floats
// (a thread's share below it sums in less than it takes to hand over), at
// most one per core the process may run on, at least one.
inline constexpr int64_t kFloatsPerHostThread = 16384;
int64_t host_sum_threads(int64_t floats);

// task(0) on the calling thread and task(1), ..., task(threads - 1) on
// threads kept between calls (made as first needed), returning when all are
// done; the first exception a task threw is rethrown then. The kept threads
// may run on every core the process could when it started, whatever core
// the caller is pinned to (the executor pins each stream's thread to one).
// One call at a time: a second waits for the first.
void run_on_host_threads(int64_t threads, const std::function<void(int64_t)>& task);

// Copies the host sum into every worker's chunk (the H2D broadcast).
void broadcast_from_host(std::span<const float> host_sum, std::span<const std::span<float>> worker_chunks);

}  // namespace trainsim
