// Order-statistic intervals of a median and the capacity probe; see spread.hpp.
#include "profiles/profiler/spread.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>

#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

// P(Binomial(n, 1/2) <= k), summed in logs so that large n does not overflow.
double binomial_half_cdf(int64_t n, int64_t k) {
  double sum = 0;
  for (int64_t i = 0; i <= k; ++i) {
    sum += std::exp(std::lgamma(static_cast<double>(n + 1)) - std::lgamma(static_cast<double>(i + 1)) -
                    std::lgamma(static_cast<double>(n - i + 1)) - static_cast<double>(n) * std::log(2.0));
  }
  return std::min(1.0, sum);
}

constexpr int kProbeSize = 96;       // matrices of the probe's products
constexpr int kProbeProducts = 120;  // per run: about 210 MFLOP, 7 ms on a core here

}  // namespace

MedianInterval median_interval(std::vector<double> samples, double confidence) {
  MedianInterval m;
  m.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return m;
  std::sort(samples.begin(), samples.end());
  m.median = median_s(samples);
  const int64_t n = m.samples;
  // x(k) with k from 1 (the widest, [min, max]) up while the coverage holds.
  int64_t k = 1;
  while (2 * (k + 1) <= n + 1 && 1 - 2 * binomial_half_cdf(n, k) >= confidence) ++k;
  m.coverage = n >= 2 ? 1 - 2 * binomial_half_cdf(n, k - 1) : 0.0;
  m.low = samples[static_cast<size_t>(k - 1)];
  m.high = samples[static_cast<size_t>(n - k)];
  m.relative_half_width = m.median > 0 && n >= 2 ? std::max(m.median - m.low, m.high - m.median) / m.median
                                                 : std::numeric_limits<double>::infinity();
  return m;
}

double capacity_probe_s(int64_t threads, int64_t repeats) {
  TRAINSIM_CHECK(threads >= 1 && repeats >= 1, "a probe needs a thread and a run");
  std::vector<Eigen::MatrixXf> a(static_cast<size_t>(threads)), b = a, c = a;
  for (int64_t t = 0; t < threads; ++t) {
    a[t] = Eigen::MatrixXf::Constant(kProbeSize, kProbeSize, 0.5f);
    b[t] = Eigen::MatrixXf::Identity(kProbeSize, kProbeSize) * 0.999f;
    c[t] = Eigen::MatrixXf::Zero(kProbeSize, kProbeSize);
  }
  return concurrent_median_s(threads, 1, repeats, [&](int64_t t) {
    for (int i = 0; i < kProbeProducts; ++i) {
      c[t].noalias() = a[t] * b[t];
      a[t].swap(c[t]);
    }
  });
}

}  // namespace trainsim
