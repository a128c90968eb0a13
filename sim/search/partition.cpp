// Partition search: bisection on the bottleneck over a suffix recursion of
// fewest workers (see partition.hpp for the objective and the complexity).
#include "sim/search/partition.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max() / 4;
constexpr double kRelativeTolerance = 1e-12;

// Prefix sums of one profile under one objective: every stage and boundary
// cost in O(1). Ranges are half-open [i, j) over 0-based layers.
class Costs {
 public:
  Costs(const Profile& profile, const Cluster& cluster, PartitionObjective objective)
      : objective_(objective), link_(partition_link(cluster)), cluster_(cluster) {
    n_ = static_cast<int64_t>(profile.layers.size());
    compute_.assign(n_ + 1, 0.0);
    forward_.assign(n_ + 1, 0.0);
    params_.assign(n_ + 1, 0.0);
    for (int64_t l = 0; l < n_; ++l) {
      const LayerProfile& layer = profile.layers[l];
      compute_[l + 1] = compute_[l] + layer.forward_s + layer.backward_s;
      forward_[l + 1] = forward_[l] + layer.forward_s;
      params_[l + 1] = params_[l] + layer.param_bytes;
    }
    // cut_s_[c]: the boundary after layer c-1; the bytes a cut carries depend
    // only on where it lies (every layer before it read by a layer after it).
    std::vector<LayerRange> ranges;
    for (int64_t l = 0; l < n_; ++l) ranges.push_back({l, l});
    const std::vector<double> bytes = boundary_bytes(profile, ranges);
    cut_s_.assign(n_ + 1, 0.0);
    for (int64_t c = 1; c < n_; ++c) cut_s_[c] = boundary_s(bytes[c - 1]);
  }

  int64_t layers() const { return n_; }
  double cut_s(int64_t c) const { return cut_s_[c]; }

  // EQUATIONS.md §4's ΣT_l with the update (C_k), plus DSP's recompute R_k.
  double compute_s(int64_t i, int64_t j) const {
    const double params = params_[j] - params_[i];
    double c = compute_[j] - compute_[i] + update_s(params, cluster_);
    if (objective_ == PartitionObjective::kDsp && j < n_) c += forward_[j] - forward_[i];
    return c;
  }

  // EQUATIONS.md §4: T(i→j, m) = (1/m)·max(C, W^m).
  double stage_s(int64_t i, int64_t j, int64_t replicas) const {
    const double sync = weight_sync_s(replicas, params_[j] - params_[i], link_);
    return replicated_stage_s(compute_s(i, j), replicas, sync);
  }

  // Fewest replicas (at most max_replicas) keeping stage [i, j) within x, or
  // kNone. C/r falls with r while W^r/r = 2w/B·(r-1)/r rises, so the
  // smallest r with C/r <= x is the only candidate.
  int64_t replicas_within(int64_t i, int64_t j, double x, int64_t max_replicas) const {
    if (max_replicas < 1 || x <= 0) return kNone;
    const double c = compute_s(i, j);
    const double want = std::ceil(c / x);
    if (want > static_cast<double>(max_replicas) + 1) return kNone;
    int64_t r = std::max<int64_t>(1, static_cast<int64_t>(want));
    if (r > 1 && stage_s(i, j, r - 1) <= x) --r;  // ceil may overshoot by rounding
    if (r <= max_replicas && stage_s(i, j, r) <= x) return r;
    if (r + 1 <= max_replicas && stage_s(i, j, r + 1) <= x) return r + 1;
    return kNone;
  }

 private:
  double boundary_s(double bytes) const {
    return objective_ == PartitionObjective::kDualPipe ? transfer_s(bytes, link_) : boundary_comm_s(bytes, link_);
  }

  PartitionObjective objective_;
  const LinkSpec& link_;
  const Cluster& cluster_;
  int64_t n_ = 0;
  std::vector<double> compute_, forward_, params_, cut_s_;
};

struct Choice {
  int64_t next = 0;  // the stage starting at i ends before layer `next`
  int64_t replicas = 1;
};

// One level of the suffix recursion: cur[i] = fewest workers for layers
// [i, n) given prev (the suffixes after the first stage; prev == cur for an
// unlimited stage count). prev is non-increasing in its index and a stage's
// replicas non-decreasing in its end, so among the ends j sharing one prev[j]
// the smallest is best: O(distinct prev values) per i.
void relax(const Costs& costs, double x, int64_t workers, int64_t max_replicas, const std::vector<int64_t>& prev,
           std::vector<int64_t>& cur, std::vector<Choice>& choice) {
  const int64_t n = costs.layers();
  cur[n] = 0;
  std::vector<std::pair<int64_t, int64_t>> ends;  // (prev value, smallest end with it)
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i + 1;
    const double cut_ok = j == n || costs.cut_s(j) <= x;
    if (cut_ok && prev[j] < kNone) {
      if (!ends.empty() && ends.back().first == prev[j]) {
        ends.back().second = j;
      } else {
        ends.emplace_back(prev[j], j);
      }
    }
    int64_t best = kNone;
    for (const auto& [v, end] : ends) {
      if (v + 1 >= best) continue;
      const int64_t r = costs.replicas_within(i, end, x, std::min(max_replicas, workers - v));
      if (r != kNone && v + r < best) {
        best = v + r;
        choice[i] = {end, r};
      }
    }
    cur[i] = best;
  }
}

std::vector<PartitionStage> follow(const Costs& costs, const std::vector<std::vector<Choice>>& levels,
                                   int64_t top_level) {
  std::vector<PartitionStage> stages;
  int64_t i = 0;
  for (int64_t k = top_level; i < costs.layers(); k = std::max<int64_t>(0, k - 1)) {
    const Choice c = levels[k][i];
    stages.push_back({{i, c.next - 1}, c.replicas, costs.stage_s(i, c.next, c.replicas)});
    i = c.next;
  }
  return stages;
}

// Fewest workers within x using at most max_stages stages (0 = any), with the
// partition reached; stages empty when infeasible.
std::vector<PartitionStage> fit(const Costs& costs, double x, int64_t workers, int64_t max_replicas,
                                int64_t max_stages) {
  const int64_t n = costs.layers();
  if (max_stages == 0) {
    std::vector<int64_t> g(n + 1, kNone);
    std::vector<std::vector<Choice>> levels(1, std::vector<Choice>(n));
    relax(costs, x, workers, max_replicas, g, g, levels[0]);
    if (g[0] > workers) return {};
    return follow(costs, levels, 0);
  }
  std::vector<int64_t> prev(n + 1, kNone), cur(n + 1, kNone);
  prev[n] = 0;  // zero stages cover only the empty suffix
  std::vector<std::vector<Choice>> levels;
  for (int64_t k = 0; k < max_stages; ++k) {
    levels.emplace_back(n);
    relax(costs, x, workers, max_replicas, prev, cur, levels.back());
    std::swap(prev, cur);
  }
  if (prev[0] > workers) return {};
  return follow(costs, levels, max_stages - 1);
}

// Straight mode: exactly `stage_count` stages of one replica within x.
// reach[k][i]: layers [i, n) split into k+1 such stages; the ends j a stage
// from i may take form a window (i, last_end[i]], counted by prefix sums.
std::vector<PartitionStage> fit_straight(const Costs& costs, double x, int64_t stage_count) {
  const int64_t n = costs.layers();
  std::vector<int64_t> last_end(n, 0);  // largest j < n with stage_s(i, j, 1) <= x, or i
  int64_t j = n - 1;
  for (int64_t i = n - 1; i >= 0; --i) {
    while (j > i && costs.stage_s(i, j, 1) > x) --j;
    last_end[i] = j;
  }
  std::vector<std::vector<char>> reach(stage_count, std::vector<char>(n + 1, 0));
  for (int64_t i = 0; i < n; ++i) reach[0][i] = costs.stage_s(i, n, 1) <= x;
  std::vector<int64_t> count(n + 2, 0);
  for (int64_t k = 1; k < stage_count; ++k) {
    for (int64_t e = 0; e <= n; ++e) {
      const bool ok = e > 0 && e < n && reach[k - 1][e] && costs.cut_s(e) <= x;
      count[e + 1] = count[e] + (ok ? 1 : 0);
    }
    for (int64_t i = 0; i < n; ++i) reach[k][i] = count[last_end[i] + 1] - count[i + 1] > 0;
  }
  if (!reach[stage_count - 1][0]) return {};
  std::vector<PartitionStage> stages;
  int64_t i = 0;
  for (int64_t k = stage_count - 1; k > 0; --k) {
    int64_t end = last_end[i];
    while (!(reach[k - 1][end] && costs.cut_s(end) <= x)) --end;
    stages.push_back({{i, end - 1}, 1, costs.stage_s(i, end, 1)});
    i = end;
  }
  stages.push_back({{i, n - 1}, 1, costs.stage_s(i, n, 1)});
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

// Smallest x in [lo, hi] that `fits`, hi known to fit; returns the partition
// found at the final hi.
std::vector<PartitionStage> bisect(double lo, double hi,
                                   const std::function<std::vector<PartitionStage>(double)>& fits) {
  std::vector<PartitionStage> best = fits(hi);
  TRAINSIM_CHECK(!best.empty(), "the bisection's upper bound must be feasible");
  for (int iteration = 0; iteration < 200 && hi - lo > kRelativeTolerance * hi; ++iteration) {
    const double mid = 0.5 * (lo + hi);
    std::vector<PartitionStage> found = fits(mid);
    if (found.empty()) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(found);
    }
  }
  return best;
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

Partition search_partition(const Profile& profile, const Cluster& cluster, const PartitionOptions& options) {
  const Costs costs(profile, cluster, options.objective);
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
  // Bounds: every stage's C_k/r_k averages to at least ΣC/workers; one stage
  // of every layer fits without boundaries, K stages within the largest of
  // all stage-of-everything and cut costs.
  const double lo = costs.compute_s(0, n) / static_cast<double>(workers) * (1 - 1e-9);
  double hi = costs.stage_s(0, n, 1);
  Partition result;
  if (options.stages > 0) {
    for (int64_t c = 1; c < n; ++c) hi = std::max(hi, costs.cut_s(c));
    const int64_t k = options.stages;
    result.stages = bisect(lo, hi, [&](double x) { return fit_straight(costs, x, k); });
    result.bottleneck_s = bottleneck_of(costs, result.stages);
    if (options.objective == PartitionObjective::kGPipe) {
      result.bottleneck_s *= gpipe_factor(k, options.microbatches, profile.batch_size);
    }
    return result;
  }
  const bool replicate = options.replicate && options.objective != PartitionObjective::kDsp;
  const int64_t max_replicas = replicate ? workers : 1;
  if (options.objective != PartitionObjective::kGPipe) {
    result.stages = bisect(lo, hi, [&](double x) { return fit(costs, x, workers, max_replicas, 0); });
    result.bottleneck_s = bottleneck_of(costs, result.stages);
    return result;
  }
  // GPipe: the bubble grows with K, so take the best of "at most K stages"
  // for every K, each partition charged the factor of its own stage count.
  result.bottleneck_s = std::numeric_limits<double>::infinity();
  for (int64_t k = 1; k <= std::min(n, workers); ++k) {
    std::vector<PartitionStage> stages =
        bisect(lo, hi, [&](double x) { return fit(costs, x, workers, max_replicas, k); });
    const int64_t used = static_cast<int64_t>(stages.size());
    const double value = bottleneck_of(costs, stages) * gpipe_factor(used, options.microbatches, profile.batch_size);
    if (value < result.bottleneck_s) {
      result.bottleneck_s = value;
      result.stages = std::move(stages);
    }
  }
  return result;
}

}  // namespace trainsim
