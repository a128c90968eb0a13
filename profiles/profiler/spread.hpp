// How sure a median of repeated measurements is, and a probe of how much of
// this machine a run gets right now. A shared machine's noise is neither
// normal nor steady (two busy processes on two cores run at times 40% apart),
// so the interval assumes nothing about its distribution: the median's
// confidence interval from order statistics.
#pragma once

#include <cstdint>
#include <vector>

namespace trainsim {

// The distribution-free confidence interval of a median: with the n samples
// sorted, x(k) <= median <= x(n+1-k) holds with probability
// 1 - 2·P(Binomial(n, 1/2) <= k - 1), whatever the distribution (the number
// of samples below the true median is Binomial(n, 1/2)).
struct MedianInterval {
  int64_t samples = 0;
  double median = 0;
  double low = 0;                   // x(k)
  double high = 0;                  // x(n + 1 - k)
  double coverage = 0;              // the probability above; 0 without samples
  double relative_half_width = 0;   // max(median - low, high - median) / median (infinite when median <= 0)
};

// The narrowest such interval whose coverage is at least `confidence`; with
// too few samples for that (fewer than 5 at 90%), [min, max] and its lower
// coverage, which the caller must check.
MedianInterval median_interval(std::vector<double> samples, double confidence);

// A fixed piece of dense arithmetic (small matrix products, about 7 ms on a
// current core) run on `threads` threads at once, as the executor's workers
// run: the median seconds of `repeats` runs. Interleaved with measurements,
// its changes say how much of the machine they had; its spread over a
// session is the machine's own variability.
double capacity_probe_s(int64_t threads, int64_t repeats = 3);

}  // namespace trainsim
