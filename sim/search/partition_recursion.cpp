// The partition search's machinery (partition_costs.hpp declares it): one
// level of the suffix recursion of fewest workers, following the choices to
// the stages, and the bisection on the bottleneck. partition.cpp drives it
// for flat searches, partition_hierarchical.cpp by machine levels.
#include <algorithm>
#include <vector>

#include "model/error.hpp"
#include "sim/search/partition_costs.hpp"

namespace trainsim {
namespace partition_detail {
namespace {

constexpr double kRelativeTolerance = 1e-12;

// DSP with a memory limit (one replica per block): every end j of a stage
// from i, stopping once the stage alone exceeds x (its time grows with j
// before the last layer). An end can beat the best so far only with fewer
// workers after it, so the scan jumps from an end that cannot to the next end
// whose suffix needs fewer (next_smaller, built right to left as the suffix
// values become final, since prev may be cur itself): O(n · (distinct values
// + ends that fail the memory or a cut)) rather than O(n · stage length).
void relax_every_end(const Costs& costs, double x, int64_t workers, const std::vector<int64_t>& prev,
                     std::vector<int64_t>& cur, std::vector<Choice>& choice, Level level) {
  const int64_t n = costs.layers();
  std::vector<int64_t> next_smaller(static_cast<size_t>(n + 1), n + 1);
  std::vector<int64_t> stack;
  auto push = [&](int64_t j) {
    while (!stack.empty() && prev[stack.back()] >= prev[j]) stack.pop_back();
    next_smaller[j] = stack.empty() ? n + 1 : stack.back();
    stack.push_back(j);
  };
  push(n);
  const int64_t last_start = level.last_start < 0 ? n - 1 : level.last_start;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (i > last_start || i < level.first_start) {
      cur[i] = kNone;
      push(i);
      continue;
    }
    int64_t best = kNone;
    auto consider = [&](int64_t j) {
      const int64_t v = prev[j];
      if (v >= kNone || v + 1 > workers || v + 1 >= best || (j < n && costs.cut_s(j) > x)) return;
      if (costs.memory_ok(i, j, 1, v, level.later_stages < 0 ? v : level.later_stages)) {
        best = v + 1;
        choice[i] = {j, 1};
      }
    };
    for (int64_t j = i + 1; j < n && costs.stage_s(i, j, 1) <= x;) {
      if (prev[j] >= kNone || prev[j] + 1 >= best) {
        j = next_smaller[j];
        continue;
      }
      consider(j);
      ++j;
    }
    if (costs.stage_s(i, n, 1) <= x) consider(n);
    cur[i] = best;
    push(i);
  }
}

}  // namespace

// One level of the suffix recursion: cur[i] = fewest workers for layers
// [i, n) given prev (the suffixes after the first stage; prev == cur for an
// unlimited stage count). A stage's replicas never fall as its end grows
// (time and memory both grow), so among the ends j sharing one prev[j] in a
// run of consecutive valid ends the smallest is best: O(runs) per i, and
// O(distinct prev values) when prev is non-increasing (free stage counts).
void relax(const Costs& costs, double x, int64_t workers, int64_t max_replicas, const std::vector<int64_t>& prev,
           std::vector<int64_t>& cur, std::vector<Choice>& choice, Level level) {
  const int64_t n = level.end < 0 ? costs.layers() : level.end;
  cur[n] = level.terminal;
  if (costs.memory_needs_every_end()) {
    TRAINSIM_CHECK(max_replicas == 1, "DSP blocks are never replicated");
    relax_every_end(costs, x, workers, prev, cur, choice, level);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> ends;  // (prev value, smallest end with it)
  const int64_t last_start = level.last_start < 0 ? n - 1 : level.last_start;
  for (int64_t i = n - 1; i >= level.begin; --i) {
    const int64_t j = i + 1;
    const bool cut_ok = j == n || costs.cut_s(j) <= x;
    if (cut_ok && prev[j] < kNone) {
      if (!ends.empty() && ends.back().first == prev[j]) {
        ends.back().second = j;
      } else {
        ends.emplace_back(prev[j], j);
      }
    }
    if (i > last_start || i < level.first_start) {
      cur[i] = kNone;
      continue;
    }
    int64_t best = kNone;
    for (const auto& [v, end] : ends) {
      if (v + 1 >= best) continue;
      const int64_t later_stages = level.later_stages < 0 ? v : level.later_stages;
      const int64_t r = costs.replicas_within(i, end, x, std::min(max_replicas, workers - v), v, later_stages);
      if (r != kNone && v + r < best) {
        best = v + r;
        choice[i] = {end, r};
      }
    }
    cur[i] = best;
  }
}

// Each stage's memory, from the workers and stages after it.
void fill_memory(const Costs& costs, std::vector<PartitionStage>& stages) {
  int64_t later_workers = 0;
  for (size_t k = stages.size(); k-- > 0;) {
    PartitionStage& s = stages[k];
    const int64_t later_stages = static_cast<int64_t>(stages.size() - 1 - k);
    s.memory_bytes = costs.memory_bytes(s.layers.first, s.layers.last + 1, s.replicas, later_workers, later_stages);
    later_workers += s.replicas;
  }
}

std::vector<PartitionStage> follow(const Costs& costs, const std::vector<std::vector<Choice>>& levels,
                                   int64_t top_level, int64_t begin, int64_t end) {
  std::vector<PartitionStage> stages;
  int64_t i = begin;
  for (int64_t k = top_level; i < (end < 0 ? costs.layers() : end); k = std::max<int64_t>(0, k - 1)) {
    const Choice c = levels[k][i];
    stages.push_back({{i, c.next - 1}, c.replicas, costs.stage_s(i, c.next, c.replicas), 0.0});
    i = c.next;
  }
  fill_memory(costs, stages);
  return stages;
}

// The objective's bottleneck of a partition, before GPipe's bubble factor.
double bottleneck_of(const Costs& costs, const std::vector<PartitionStage>& stages) {
  double worst = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    worst = std::max(worst, stages[k].time_s);
    if (k > 0) worst = std::max(worst, costs.cut_s(stages[k].layers.first));
  }
  return worst;
}

// Smallest x in [lo, hi] that `fits`, hi known to fit, to a relative
// tolerance; returns the partition found at the final hi. With `reached`
// (the bottleneck a partition attains, the x it needs): a partition found
// within x lowers hi to what it attains, and, since the optimum is some
// partition's attained value, hi is optimal once nothing fits just below
// it, which ends the search after one more fit rather than after the
// bisection has closed the whole gap below.
std::vector<PartitionStage> bisect(double lo, double hi, const Fitter& fits, const Reached& reached) {
  std::vector<PartitionStage> best = fits(hi);
  TRAINSIM_CHECK(!best.empty(), "the bisection's upper bound must be feasible");
  const auto lower_hi = [&](double x, std::vector<PartitionStage>&& found) {
    hi = reached ? std::min(x, reached(found)) : x;
    best = std::move(found);
  };
  if (reached) hi = std::min(hi, reached(best));
  for (int iteration = 0; iteration < 200 && hi - lo > kRelativeTolerance * hi; ++iteration) {
    const double mid = 0.5 * (lo + hi);
    std::vector<PartitionStage> found = fits(mid);
    if (found.empty()) {
      lo = mid;
      continue;
    }
    lower_hi(mid, std::move(found));
    if (!reached || hi - lo <= kRelativeTolerance * hi) continue;
    const double below = hi * (1 - kRelativeTolerance);
    found = fits(below);
    if (found.empty()) {
      lo = below;
    } else {
      lower_hi(below, std::move(found));
    }
  }
  return best;
}

}  // namespace partition_detail

}  // namespace trainsim
