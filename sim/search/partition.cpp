// Partition search: bisection on the bottleneck over a suffix recursion of
// fewest workers (see partition.hpp for the objective and the complexity;
// the recursion and the bisection are partition_recursion.cpp). PipeDream's
// hierarchical form is partition_hierarchical.cpp.
#include "sim/search/partition.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"
#include "sim/search/partition_costs.hpp"

namespace trainsim {
namespace {

using partition_detail::bisect;
using partition_detail::bottleneck_of;
using partition_detail::Choice;
using partition_detail::Costs;
using partition_detail::fill_memory;
using partition_detail::Fitter;
using partition_detail::follow;
using partition_detail::hierarchical_partition;
using partition_detail::kNone;
using partition_detail::Level;
using partition_detail::Reached;
using partition_detail::relax;

// How the stage count is bounded: free (one unlimited level), at most K
// (level k: at most k+1 stages), exactly K (level k: exactly k+1 stages), or
// free but counted exactly (the best of the exact levels; DualPipe's memory
// needs the count of later stages).
enum class StageCount { kAny, kAtMost, kExactly, kAnyCountedExactly };

// Where the stages of a partition into exactly K unreplicated stages within
// x can start, as bounds that hold whatever the memory and cuts allow:
// reach[t] is the last layer stage t + 1 can start at (t stages after layer
// 0), back[t] the first layer from which t stages can end at the last one.
// Near the optimum the stages have little slack, so each level of the
// recursion computes a narrow band of starts instead of every layer.
struct StartWindows {
  std::vector<int64_t> reach, back;
};

StartWindows start_windows(const Costs& costs, double x, int64_t stages) {
  const int64_t n = costs.layers();
  const auto fits = [&](int64_t i, int64_t j) { return costs.stage_s(i, j, 1) <= x; };
  // furthest[i]: the last end of a stage from i within x (i if none). Below
  // n a stage's time grows with its end and falls with its start, so the ends
  // move forward with the start; the end n is checked on its own (DSP's last
  // stage skips the recomputation, so [i, n) may fit where [i, n - 1) does not).
  std::vector<int64_t> furthest(static_cast<size_t>(n), 0);
  for (int64_t i = 0, j = 0; i < n; ++i) {
    j = std::max(j, i);
    while (j + 1 < n && fits(i, j + 1)) ++j;
    furthest[i] = fits(i, n) ? n : j;
    if (i > 0) furthest[i] = std::max(furthest[i], furthest[i - 1]);  // over every start up to i
  }
  // earliest[j]: the first start of a stage ending at j within x (n + 1 if none), likewise.
  std::vector<int64_t> earliest(static_cast<size_t>(n + 1), n + 1);
  for (int64_t j = 1, i = 0; j < n; ++j) {
    while (i < j && !fits(i, j)) ++i;
    if (i < j) earliest[j] = i;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (fits(i, n)) {
      earliest[n] = i;
      break;
    }
  }
  for (int64_t j = n - 1; j >= 1; --j) earliest[j] = std::min(earliest[j], earliest[j + 1]);  // over every end from j
  StartWindows w;
  w.reach.assign(static_cast<size_t>(stages + 1), 0);
  w.back.assign(static_cast<size_t>(stages + 1), n);
  for (int64_t t = 1; t <= stages; ++t) {
    w.reach[t] = w.reach[t - 1] >= n ? n : furthest[w.reach[t - 1]];
    const int64_t after = w.back[t - 1];  // stage t ends where the t - 1 after it can start
    w.back[t] = after < 1 ? 0 : after > n ? n + 1 : earliest[after];
  }
  return w;
}

// What one fit writes, kept across the fits of a search (a bisection runs
// dozens): its levels' choices (only entries written in the same fit are
// read back, along the partition found) and the two suffix tables.
struct FitBuffers {
  std::vector<std::vector<Choice>> levels;
  std::vector<int64_t> prev, cur;
};

// Fewest workers within x (and the memory limit), with the partition reached;
// stages empty when infeasible. Ties: fewer workers, then fewer stages.
std::vector<PartitionStage> fit(const Costs& costs, double x, int64_t workers, int64_t max_replicas, StageCount count,
                                int64_t max_stages, FitBuffers& buffers) {
  const int64_t n = costs.layers();
  std::vector<std::vector<Choice>>& levels = buffers.levels;
  const auto level_count = static_cast<size_t>(count == StageCount::kAny ? 1 : max_stages);
  if (levels.size() < level_count) levels.resize(level_count);
  for (size_t k = 0; k < level_count; ++k) levels[k].resize(n);
  std::vector<int64_t>& prev = buffers.prev;
  std::vector<int64_t>& cur = buffers.cur;
  prev.assign(n + 1, kNone);
  if (count == StageCount::kAny) {
    relax(costs, x, workers, max_replicas, prev, prev, levels[0], {});
    if (prev[0] > workers) return {};
    return follow(costs, levels, 0);
  }
  const bool exact = count != StageCount::kAtMost;
  cur.assign(n + 1, kNone);
  prev[n] = 0;  // zero stages cover only the empty suffix
  const StartWindows windows =
      count == StageCount::kExactly && max_replicas == 1 ? start_windows(costs, x, max_stages) : StartWindows{};
  int64_t best_level = -1, best_workers = kNone;
  for (int64_t k = 0; k < max_stages; ++k) {
    Level level{exact ? k : -1, exact && k > 0 ? kNone : 0};
    if (!windows.reach.empty()) {
      // Level k is the last k + 1 of max_stages stages: it starts after
      // max_stages - 1 - k stages from layer 0 and its k + 1 stages end at n.
      const int64_t before = max_stages - 1 - k;
      level.first_start = std::max(before, windows.back[k + 1]);
      level.last_start = std::min(windows.reach[before], n - (k + 1));
      if (level.last_start < level.first_start) level.first_start = n, level.last_start = 0;  // nothing fits
    }
    relax(costs, x, workers, max_replicas, prev, cur, levels[k], level);
    if (exact) cur[n] = kNone;  // the next level needs one more stage
    if (cur[0] < best_workers && (count == StageCount::kAnyCountedExactly || k == max_stages - 1)) {
      best_workers = cur[0];
      best_level = k;
    }
    std::swap(prev, cur);
  }
  if (!exact) best_level = max_stages - 1, best_workers = prev[0];
  if (best_level < 0 || best_workers > workers) return {};
  return follow(costs, levels, best_level);
}

double peak_memory_bytes(const std::vector<PartitionStage>& stages) {
  double peak = 0;
  for (const PartitionStage& s : stages) peak = std::max(peak, s.memory_bytes);
  return peak;
}

// No partition fits the limit at any bottleneck (x_any admits every stage's
// time): bisect the limit down to the smallest peak any partition reaches and
// name it and its stage in the error.
[[noreturn]] void throw_no_fit(Costs& costs, double x_any, const Fitter& fits) {
  const double limit_bytes = costs.limit_bytes();
  costs.set_limit_bytes(std::numeric_limits<double>::infinity());
  std::vector<PartitionStage> best = fits(x_any);
  TRAINSIM_CHECK(!best.empty(), "without a memory limit some partition must fit");
  double lo = limit_bytes, hi = peak_memory_bytes(best);
  for (int iteration = 0; iteration < 100 && hi - lo > 1e-9 * hi; ++iteration) {
    const double mid = 0.5 * (lo + hi);
    costs.set_limit_bytes(mid);
    std::vector<PartitionStage> found = fits(x_any);
    if (found.empty()) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(found);
    }
  }
  size_t worst = 0;
  for (size_t k = 0; k < best.size(); ++k) {
    if (best[k].memory_bytes > best[worst].memory_bytes) worst = k;
  }
  throw InputError("--memory-limit", "no partition fits " + format_bytes(limit_bytes) + " per device",
                   "a limit of at least " + format_bytes(best[worst].memory_bytes) +
                       " (the smallest peak, on stage " + std::to_string(worst) + ", layers " +
                       std::to_string(best[worst].layers.first) + "-" + std::to_string(best[worst].layers.last) +
                       "), or more workers");
}

// Fixed stages within x: each stage's fewest replicas from the last stage
// back (fewer later workers only lower an earlier stage's memory), so the
// total is the fewest possible; empty when over `workers` or a cut exceeds x.
std::vector<PartitionStage> fit_fixed(const Costs& costs, double x, int64_t workers, int64_t max_replicas,
                                      const std::vector<LayerRange>& ranges) {
  std::vector<PartitionStage> stages(ranges.size());
  int64_t later = 0;
  for (size_t k = ranges.size(); k-- > 0;) {
    const int64_t i = ranges[k].first, j = ranges[k].last + 1;
    if (k > 0 && costs.cut_s(i) > x) return {};
    const int64_t later_stages = static_cast<int64_t>(ranges.size() - 1 - k);
    const int64_t r = costs.replicas_within(i, j, x, std::min(max_replicas, workers - later), later, later_stages);
    if (r == kNone) return {};
    stages[k] = {ranges[k], r, costs.stage_s(i, j, r), 0.0};
    later += r;
  }
  fill_memory(costs, stages);
  return stages;
}

double gpipe_factor(int64_t stages, int64_t microbatches, int64_t batch_size) {
  const int64_t m = microbatches > 0 ? microbatches : std::min<int64_t>(4 * stages, batch_size);
  return static_cast<double>(m + stages - 1) / static_cast<double>(m);
}

}  // namespace

PartitionObjective parse_partition_objective(const std::string& name, const std::string& where) {
  if (name == "pipedream") return PartitionObjective::kOneFOneB;
  if (name == "dualpipe") return PartitionObjective::kDualPipe;
  if (name == "gpipe") return PartitionObjective::kGPipe;
  if (name == "dsp") return PartitionObjective::kDsp;
  throw InputError(where, "is '" + name + "'", "one of pipedream, dualpipe, gpipe, dsp");
}

const LinkSpec& partition_link(const Cluster& cluster) {
  return cluster.machines > 1 ? cluster.inter_link : cluster.intra_link;
}

double resolve_memory_limit_bytes(double memory_limit_bytes, const Cluster& cluster) {
  if (memory_limit_bytes == 0) return cluster.device.memory_bytes;
  if (memory_limit_bytes < 0 || std::isnan(memory_limit_bytes)) return std::numeric_limits<double>::infinity();
  return memory_limit_bytes;
}

Partition search_partition(const Profile& profile, const Cluster& cluster, const PartitionOptions& options) {
  Costs costs(profile, cluster, options.objective, resolve_memory_limit_bytes(options.memory_limit_bytes, cluster),
              partition_link(cluster));
  const int64_t n = costs.layers();
  const int64_t devices = device_count(cluster);
  const int64_t workers = options.workers == 0 ? devices : options.workers;
  if (workers < 1 || workers > devices) {
    throw InputError("--workers", std::to_string(workers), "between 1 and the " + std::to_string(devices) +
                                                               " devices of " + cluster.name);
  }
  if (options.stages < 0 || options.stages > std::min(n, workers)) {
    throw InputError("--stages", std::to_string(options.stages) + " stages",
                     "at most one stage per layer (" + std::to_string(n) + ") and per worker (" +
                         std::to_string(workers) + ")");
  }
  const bool replicate =
      options.stages == 0 && options.replicate && options.objective != PartitionObjective::kDsp;
  const int64_t max_replicas = replicate ? workers : 1;
  const int64_t most_stages = std::min(n, workers);
  // Bounds: every stage's C_k/r_k averages to at least ΣC/workers. x_any
  // admits every stage and boundary (a stage's C_k + R_k is at most twice the
  // whole model's C, its W^r/r below W^workers of every weight).
  const double lo = costs.compute_s(0, n) / static_cast<double>(workers) * (1 - 1e-9);
  double x_any = std::max(2 * costs.stage_s(0, n, 1), weight_sync_s(workers, costs.params_bytes(0, n),
                                                                     partition_link(cluster)));
  for (int64_t c = 1; c < n; ++c) x_any = std::max(x_any, costs.cut_s(c));

  const int64_t per_machine = cluster.devices_per_machine;
  if (options.hierarchical && cluster.machines > 1 && options.stages == 0 &&
      options.objective == PartitionObjective::kOneFOneB && workers % per_machine == 0) {
    const Costs intra(profile, cluster, options.objective, std::numeric_limits<double>::infinity(),
                      cluster.intra_link);
    const int64_t machines = workers / per_machine;
    Partition h = hierarchical_partition(costs, intra, lo, x_any, machines, per_machine, options.replicate);
    if (!costs.limited() || peak_memory_bytes(h.stages) <= costs.limit_bytes()) return h;
  }

  StageCount count = StageCount::kAny;
  int64_t count_limit = 0;
  if (options.stages > 0) {
    count = StageCount::kExactly, count_limit = options.stages;
  } else if (options.objective == PartitionObjective::kGPipe) {
    count = StageCount::kAtMost, count_limit = most_stages;
  } else if (options.objective == PartitionObjective::kDualPipe && costs.limited()) {
    count = StageCount::kAnyCountedExactly, count_limit = most_stages;
  }
  FitBuffers buffers;
  auto fitter = [&](StageCount c, int64_t k) -> Fitter {
    return [&costs, workers, max_replicas, c, k, &buffers](double x) {
      return fit(costs, x, workers, max_replicas, c, k, buffers);
    };
  };
  const Reached reached = [&costs](const std::vector<PartitionStage>& stages) { return bottleneck_of(costs, stages); };
  const Fitter fits = fitter(count, count_limit);
  if (fits(x_any).empty()) throw_no_fit(costs, x_any, fits);
  // The one-stage (or straight) bound is tighter when it fits.
  const double hi = fits(costs.stage_s(0, n, 1)).empty() ? x_any : costs.stage_s(0, n, 1);

  Partition result;
  if (options.objective != PartitionObjective::kGPipe) {
    result.stages = bisect(lo, options.stages > 0 ? x_any : hi, fits, reached);
    result.bottleneck_s = bottleneck_of(costs, result.stages);
    return result;
  }
  // GPipe: the bubble grows with K, so take the best of "at most K stages"
  // for every K, each partition charged the factor of its own stage count
  // (ties to the fewest stages allowed). The most stages allowed give the
  // least bottleneck b_min, so no K with b_min · factor(K) above the best so
  // far can win, nor can any larger K (the factor grows with K): the loop
  // stops there. Nor can a K whose partitions of exactly K stages all exceed
  // best / factor(K): one fit there skips K's bisection (its partitions of
  // fewer stages are those of a smaller K, considered in their turn).
  result.bottleneck_s = std::numeric_limits<double>::infinity();
  int64_t result_k = 0;
  const auto consider = [&](int64_t k, const Fitter& fits_k) {
    std::vector<PartitionStage> stages = bisect(lo, fits_k(hi).empty() ? x_any : hi, fits_k, reached);
    const int64_t used = static_cast<int64_t>(stages.size());
    const double value = bottleneck_of(costs, stages) * gpipe_factor(used, options.microbatches, profile.batch_size);
    if (value < result.bottleneck_s || (value == result.bottleneck_s && k < result_k)) {
      result.bottleneck_s = value;
      result.stages = std::move(stages);
      result_k = k;
    }
  };
  const int64_t first_k = options.stages > 0 ? options.stages : 1;
  double least_bottleneck_s = 0;
  if (count_limit > first_k) {
    const Fitter fits_most = fitter(count, count_limit);
    consider(count_limit, fits_most);  // fits at x_any, as fits did
    least_bottleneck_s = bottleneck_of(costs, result.stages);
  }
  for (int64_t k = first_k; k <= count_limit; ++k) {
    const double factor = gpipe_factor(k, options.microbatches, profile.batch_size);
    if (least_bottleneck_s * factor > result.bottleneck_s) break;
    if (k == result_k) continue;
    const Fitter fits_k = fitter(count, k);
    // 1 + 1e-9: a K that ties the best is not lost to rounding.
    if (std::isfinite(result.bottleneck_s) && fits_k(result.bottleneck_s / factor * (1 + 1e-9)).empty()) continue;
    if (fits_k(x_any).empty()) continue;
    consider(k, fits_k);
  }
  return result;
}

Partition evaluate_partition(const Profile& profile, const Cluster& cluster, const std::vector<LayerRange>& ranges,
                             const PartitionOptions& options, const std::string& where) {
  Costs costs(profile, cluster, options.objective, resolve_memory_limit_bytes(options.memory_limit_bytes, cluster),
              partition_link(cluster));
  const int64_t n = costs.layers();
  const int64_t workers = options.workers == 0 ? device_count(cluster) : options.workers;
  int64_t next = 0;
  for (const LayerRange& r : ranges) {
    if (r.first != next || r.last < r.first || r.last >= n) {
      throw InputError(where, "has the range " + std::to_string(r.first) + "-" + std::to_string(r.last),
                       "contiguous ranges starting at " + std::to_string(next) + " and covering layers 0-" +
                           std::to_string(n - 1));
    }
    next = r.last + 1;
  }
  const int64_t k_count = static_cast<int64_t>(ranges.size());
  if (next != n || k_count > workers) {
    throw InputError(where, std::to_string(k_count) + " stages ending at layer " + std::to_string(next - 1),
                     "stages covering layers 0-" + std::to_string(n - 1) + ", at most one per worker (" +
                         std::to_string(workers) + ")");
  }
  const bool replicate = options.replicate && options.objective != PartitionObjective::kDsp;
  const int64_t max_replicas = replicate ? workers : 1;
  const Fitter fits = [&](double x) { return fit_fixed(costs, x, workers, max_replicas, ranges); };
  double x_any = std::max(2 * costs.stage_s(0, n, 1), weight_sync_s(workers, costs.params_bytes(0, n), costs.link()));
  for (int64_t c = 1; c < n; ++c) x_any = std::max(x_any, costs.cut_s(c));
  if (fits(x_any).empty()) throw_no_fit(costs, x_any, fits);
  Partition result;
  result.stages = bisect(costs.compute_s(0, n) / static_cast<double>(workers) * (1 - 1e-9), x_any, fits,
                         [&costs](const std::vector<PartitionStage>& stages) { return bottleneck_of(costs, stages); });
  result.bottleneck_s = bottleneck_of(costs, result.stages);
  if (options.objective == PartitionObjective::kGPipe) {
    result.bottleneck_s *= gpipe_factor(k_count, options.microbatches, profile.batch_size);
  }
  return result;
}

}  // namespace trainsim
