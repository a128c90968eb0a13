// Partition search: bisection on the bottleneck over a suffix recursion of
// fewest workers (see partition.hpp for the objective and the complexity).
#include "sim/search/partition.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max() / 4;
constexpr double kRelativeTolerance = 1e-12;

// Prefix sums of one profile under one objective: every stage and boundary
// cost and every stage's memory in O(1). Ranges are half-open [i, j) over
// 0-based layers.
class Costs {
 public:
  Costs(const Profile& profile, const Cluster& cluster, PartitionObjective objective, double memory_limit_bytes,
        const LinkSpec& link)
      : objective_(objective), link_(link), limit_bytes_(memory_limit_bytes) {
    n_ = static_cast<int64_t>(profile.layers.size());
    compute_.assign(n_ + 1, 0.0);
    forward_.assign(n_ + 1, 0.0);
    params_.assign(n_ + 1, 0.0);
    activations_.assign(n_ + 1, 0.0);
    std::vector<double> workspace;
    for (int64_t l = 0; l < n_; ++l) {
      const LayerProfile& layer = profile.layers[l];
      // With the layer's update (measured, or from its bytes): C_k's U_k.
      compute_[l + 1] = compute_[l] + layer.forward_s + layer.backward_s + range_update_s(profile, l, l, cluster);
      forward_[l + 1] = forward_[l] + layer.forward_s;
      params_[l + 1] = params_[l] + layer.param_bytes;
      activations_[l + 1] = activations_[l] + layer.activation_bytes;
      workspace.push_back(layer.workspace_bytes.value_or(0.0));
    }
    build_workspace_table(workspace);
    // cut_s_[c]: the boundary after layer c-1; the bytes a cut carries depend
    // only on where it lies (every layer before it read by a layer after it).
    std::vector<LayerRange> ranges;
    for (int64_t l = 0; l < n_; ++l) ranges.push_back({l, l});
    const std::vector<double> bytes = boundary_bytes(profile, ranges);
    cut_s_.assign(n_ + 1, 0.0);
    cut_bytes_.assign(n_ + 1, 0.0);
    for (int64_t c = 1; c < n_; ++c) {
      cut_bytes_[c] = bytes[c - 1];
      cut_s_[c] = boundary_s(bytes[c - 1]);
    }
  }

  int64_t layers() const { return n_; }
  const LinkSpec& link() const { return link_; }
  double cut_s(int64_t c) const { return cut_s_[c]; }
  double params_bytes(int64_t i, int64_t j) const { return params_[j] - params_[i]; }
  double limit_bytes() const { return limit_bytes_; }
  void set_limit_bytes(double limit_bytes) { limit_bytes_ = limit_bytes; }
  bool limited() const { return std::isfinite(limit_bytes_); }
  // DSP's memory counts the bytes leaving a stage, not monotone in its end.
  bool memory_needs_every_end() const { return limited() && objective_ == PartitionObjective::kDsp; }

  // docs/equations.md §4's ΣT_l with the update (C_k), plus DSP's recompute R_k.
  double compute_s(int64_t i, int64_t j) const {
    double c = compute_[j] - compute_[i];
    if (objective_ == PartitionObjective::kDsp && j < n_) c += forward_[j] - forward_[i];
    return c;
  }

  // docs/equations.md §4: T(i→j, m) = (1/m)·max(C, W^m).
  double stage_s(int64_t i, int64_t j, int64_t replicas) const {
    const double sync = weight_sync_s(replicas, params_bytes(i, j), link_);
    return replicated_stage_s(compute_s(i, j), replicas, sync);
  }

  // One device's memory of stage [i, j) with `replicas`, followed by stages
  // holding `later_workers` devices in `later_stages` stages; the formulas of
  // partition.hpp, i.e. what stage_memory and the schedule's cost model add.
  double memory_bytes(int64_t i, int64_t j, int64_t replicas, int64_t later_workers, int64_t later_stages) const {
    const double w = params_bytes(i, j);
    const double kept = activations_[j] - activations_[i] + cut_bytes_[i];  // a_k + i_k
    const double base = 3.0 * w + workspace_max(i, j);                    // weights, gradients, momentum
    switch (objective_) {
      case PartitionObjective::kOneFOneB: {  // weight_stashing_memory
        const int64_t in_flight = (later_workers + 2 * replicas - 1) / replicas;
        return base + static_cast<double>(in_flight) * kept + static_cast<double>(in_flight - 1) * w;
      }
      case PartitionObjective::kDualPipe: {  // predict_dualpipe, SpecTrain's three extra copies
        const int64_t in_flight = (2 * later_stages + replicas) / replicas;
        return base + static_cast<double>(in_flight) * kept + 3.0 * w;
      }
      case PartitionObjective::kGPipe:  // predict_gpipe: the replica's share of the micro-batches
        return base + kept / static_cast<double>(replicas);
      case PartitionObjective::kDsp:  // predict_dsp: m_k = 2·later, p_k = 1, q_k = 0 but on the last block
        return base + kept +
               (later_stages > 0 ? 2.0 * static_cast<double>(later_stages) * cut_bytes_[i] + 3.0 * cut_bytes_[j] : 0.0);
    }
    return base;
  }

  bool memory_ok(int64_t i, int64_t j, int64_t replicas, int64_t later_workers, int64_t later_stages) const {
    return !limited() || memory_bytes(i, j, replicas, later_workers, later_stages) <= limit_bytes_;
  }

  // Fewest replicas (at most max_replicas) keeping stage [i, j) within x and
  // the memory limit, or kNone. Time: C/r falls with r while W^r/r =
  // 2w/B·(r-1)/r rises, so the replicas within x form an interval; memory
  // never grows with r (fewer batches in flight per replica), so the answer
  // is the smallest r of the interval that fits, found by bisection.
  int64_t replicas_within(int64_t i, int64_t j, double x, int64_t max_replicas, int64_t later_workers,
                          int64_t later_stages) const {
    const int64_t r = fastest_replicas_within(i, j, x, max_replicas);
    if (r == kNone || memory_ok(i, j, r, later_workers, later_stages)) return r;
    if (!memory_ok(i, j, max_replicas, later_workers, later_stages)) return kNone;
    int64_t bad = r, good = max_replicas;
    while (good - bad > 1) {
      const int64_t mid = bad + (good - bad) / 2;
      (memory_ok(i, j, mid, later_workers, later_stages) ? good : bad) = mid;
    }
    return stage_s(i, j, good) <= x ? good : kNone;
  }

 private:
  // The smallest r (at most max_replicas) with stage_s(i, j, r) <= x, or kNone.
  int64_t fastest_replicas_within(int64_t i, int64_t j, double x, int64_t max_replicas) const {
    if (max_replicas < 1 || x <= 0) return kNone;
    const double want = std::ceil(compute_s(i, j) / x);
    if (want > static_cast<double>(max_replicas) + 1) return kNone;
    int64_t r = std::max<int64_t>(1, static_cast<int64_t>(want));
    if (r > 1 && stage_s(i, j, r - 1) <= x) --r;  // ceil may overshoot by rounding
    if (r <= max_replicas && stage_s(i, j, r) <= x) return r;
    if (r + 1 <= max_replicas && stage_s(i, j, r + 1) <= x) return r + 1;
    return kNone;
  }

  double boundary_s(double bytes) const {
    return objective_ == PartitionObjective::kDualPipe ? transfer_s(bytes, link_) : boundary_comm_s(bytes, link_);
  }

  // Sparse table: workspace_[p][l] = max workspace of layers [l, l + 2^p).
  void build_workspace_table(const std::vector<double>& workspace) {
    workspace_.push_back(workspace);
    for (int64_t p = 1; (int64_t{1} << p) <= n_; ++p) {
      const std::vector<double>& below = workspace_.back();
      std::vector<double> row(static_cast<size_t>(n_ - (int64_t{1} << p) + 1));
      for (size_t l = 0; l < row.size(); ++l) row[l] = std::max(below[l], below[l + (size_t{1} << (p - 1))]);
      workspace_.push_back(std::move(row));
    }
  }

  double workspace_max(int64_t i, int64_t j) const {
    int p = 0;
    while ((int64_t{2} << p) <= j - i) ++p;
    return std::max(workspace_[p][i], workspace_[p][j - (int64_t{1} << p)]);
  }

  PartitionObjective objective_;
  LinkSpec link_;
  double limit_bytes_ = 0;
  int64_t n_ = 0;
  std::vector<double> compute_, forward_, params_, activations_, cut_s_, cut_bytes_;
  std::vector<std::vector<double>> workspace_;
};

struct Choice {
  int64_t next = 0;  // the stage starting at i ends before layer `next`
  int64_t replicas = 1;
};

// What one level of the suffix recursion knows of the stages after its first:
// later_stages is exact only when levels count stages exactly (else -1), and
// terminal is the value of the empty suffix (0, or kNone when exactly k >= 1
// more stages must follow).
struct Level {
  int64_t later_stages = -1;
  int64_t terminal = 0;
  int64_t begin = 0;   // the layers [begin, end) to cover; end < 0 = every layer
  int64_t end = -1;
};

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
  for (int64_t i = n - 1; i >= 0; --i) {
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
                                   int64_t top_level, int64_t begin = 0, int64_t end = -1) {
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

// How the stage count is bounded: free (one unlimited level), at most K
// (level k: at most k+1 stages), exactly K (level k: exactly k+1 stages), or
// free but counted exactly (the best of the exact levels; DualPipe's memory
// needs the count of later stages).
enum class StageCount { kAny, kAtMost, kExactly, kAnyCountedExactly };

// Fewest workers within x (and the memory limit), with the partition reached;
// stages empty when infeasible. Ties: fewer workers, then fewer stages.
std::vector<PartitionStage> fit(const Costs& costs, double x, int64_t workers, int64_t max_replicas, StageCount count,
                                int64_t max_stages) {
  const int64_t n = costs.layers();
  if (count == StageCount::kAny) {
    std::vector<int64_t> g(n + 1, kNone);
    std::vector<std::vector<Choice>> levels(1, std::vector<Choice>(n));
    relax(costs, x, workers, max_replicas, g, g, levels[0], {});
    if (g[0] > workers) return {};
    return follow(costs, levels, 0);
  }
  const bool exact = count != StageCount::kAtMost;
  std::vector<int64_t> prev(n + 1, kNone), cur(n + 1, kNone);
  prev[n] = 0;  // zero stages cover only the empty suffix
  std::vector<std::vector<Choice>> levels;
  int64_t best_level = -1, best_workers = kNone;
  for (int64_t k = 0; k < max_stages; ++k) {
    levels.emplace_back(n);
    const Level level{exact ? k : -1, exact && k > 0 ? kNone : 0};
    relax(costs, x, workers, max_replicas, prev, cur, levels.back(), level);
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

// The objective's bottleneck of a partition, before GPipe's bubble factor.
double bottleneck_of(const Costs& costs, const std::vector<PartitionStage>& stages) {
  double worst = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    worst = std::max(worst, stages[k].time_s);
    if (k > 0) worst = std::max(worst, costs.cut_s(stages[k].layers.first));
  }
  return worst;
}

using Fitter = std::function<std::vector<PartitionStage>(double)>;
using Reached = std::function<double(const std::vector<PartitionStage>&)>;

// Smallest x in [lo, hi] that `fits`, hi known to fit, to a relative
// tolerance; returns the partition found at the final hi. With `reached`
// (the bottleneck a partition attains, the x it needs): a partition found
// within x lowers hi to what it attains, and, since the optimum is some
// partition's attained value, hi is optimal once nothing fits just below
// it, which ends the search after one more fit rather than after the
// bisection has closed the whole gap below.
std::vector<PartitionStage> bisect(double lo, double hi, const Fitter& fits, const Reached& reached = {}) {
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

// ---- PipeDream's hierarchical search (docs/equations.md §4, "Hierarchical") ----
// Level 1 splits a layer range over the devices of one machine on the intra
// link; level 2 splits the model into ranges each run by whole machines,
// T = (1/m)·max(A¹(range), W^m on the inter link), boundaries on the inter link.

// Level 1 for one bottleneck y: reach[i] = the largest j such that layers
// [i, j) split over at most `devices` devices of one machine keep every stage
// and intra boundary within y (i when none). Feasible ranges shrink to
// feasible ranges, so reach and each h_d below never decrease in i, and the
// best first stage from i with r replicas ends at the last allowed cut before
// E_r(i), its furthest end within y: O(D·N) two pointers plus O(D²·N).
std::vector<int64_t> machine_reach(const Costs& intra, double y, int64_t devices, int64_t max_replicas) {
  const int64_t n = intra.layers();
  std::vector<std::vector<int64_t>> stage_end(static_cast<size_t>(max_replicas + 1), std::vector<int64_t>(n, 0));
  for (int64_t r = 1; r <= max_replicas; ++r) {
    int64_t e = 0;
    for (int64_t i = 0; i < n; ++i) {
      e = std::max(e, i);
      while (e < n && intra.stage_s(i, e + 1, r) <= y) ++e;
      stage_end[r][i] = e;
    }
  }
  std::vector<int64_t> last_cut(n, -1);  // largest c <= e, c >= 1, whose intra boundary is within y
  for (int64_t e = 1; e < n; ++e) last_cut[e] = intra.cut_s(e) <= y ? e : last_cut[e - 1];
  std::vector<std::vector<int64_t>> h(static_cast<size_t>(devices + 1), std::vector<int64_t>(n));
  for (int64_t i = 0; i < n; ++i) h[0][i] = i;
  for (int64_t d = 1; d <= devices; ++d) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = h[d - 1][i];
      for (int64_t r = 1; r <= std::min(d, max_replicas); ++r) {
        const int64_t e = stage_end[r][i];
        if (e <= i) continue;
        best = std::max(best, e);
        const int64_t cut = e < n ? last_cut[e] : last_cut[n - 1];
        if (d > r && e < n && cut > i) best = std::max(best, h[d - r][cut]);
      }
      h[d][i] = best;
    }
  }
  return h[devices];
}

// Level 2 for one bottleneck x: fewest machines covering the model with
// groups [i, j) on m machines, A¹(i, j) <= m·x (reach at y = m·x) and
// W^m <= m·x; as relax, the smallest end of each run of equal suffix values
// is best, and W^m/m grows with m so the smallest m reaching j is the only
// candidate. Groups returned as stages (replicas = machines); empty when none.
std::vector<PartitionStage> fit_machines(const Costs& inter, const Costs& intra, double x, int64_t machines,
                                         int64_t devices, bool replicate) {
  const int64_t n = inter.layers();
  const int64_t max_machines = replicate ? machines : 1;
  std::vector<std::vector<int64_t>> reach;
  for (int64_t m = 1; m <= max_machines; ++m) {
    reach.push_back(machine_reach(intra, static_cast<double>(m) * x, devices, replicate ? devices : 1));
  }
  std::vector<int64_t> g(n + 1, kNone);
  std::vector<Choice> choice(n);
  g[n] = 0;
  std::vector<std::pair<int64_t, int64_t>> ends;
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t j = i + 1;
    if ((j == n || inter.cut_s(j) <= x) && g[j] < kNone) {
      if (!ends.empty() && ends.back().first == g[j]) {
        ends.back().second = j;
      } else {
        ends.emplace_back(g[j], j);
      }
    }
    for (const auto& [v, end] : ends) {
      if (v + 1 >= g[i]) continue;
      for (int64_t m = 1; m <= std::min(max_machines, machines - v); ++m) {
        if (reach[m - 1][i] < end) continue;
        const double sync_s = weight_sync_s(m, inter.params_bytes(i, end), inter.link());
        if (sync_s <= static_cast<double>(m) * x && v + m < g[i]) {
          g[i] = v + m;
          choice[i] = {end, m};
        }
        break;
      }
    }
  }
  if (g[0] > machines) return {};
  std::vector<PartitionStage> groups;
  for (int64_t i = 0; i < n; i = choice[i].next) groups.push_back({{i, choice[i].next - 1}, choice[i].replicas, 0, 0});
  return groups;
}

// The level-1 optimum of layers [i, j) on one machine: its stages and A¹.
std::vector<PartitionStage> machine_partition(const Costs& intra, int64_t i, int64_t j, int64_t devices,
                                              bool replicate) {
  const int64_t max_replicas = replicate ? devices : 1;
  const Fitter fits = [&](double y) -> std::vector<PartitionStage> {
    std::vector<int64_t> g(static_cast<size_t>(intra.layers() + 1), kNone);
    std::vector<std::vector<Choice>> levels(1, std::vector<Choice>(intra.layers()));
    relax(intra, y, devices, max_replicas, g, g, levels[0], {-1, 0, i, j});
    if (g[i] > devices) return {};
    return follow(intra, levels, 0, i, j);
  };
  const double lo = intra.compute_s(i, j) / static_cast<double>(devices) * (1 - 1e-9);
  return bisect(lo, intra.stage_s(i, j, 1), fits, [&](const auto& stages) { return bottleneck_of(intra, stages); });
}

// Expands level-2 groups into their level-1 stages (replicas multiplied by
// the group's machines) and charges the hierarchical objective.
Partition expand_groups(const Costs& inter, const Costs& intra, const std::vector<PartitionStage>& groups,
                        int64_t devices, bool replicate) {
  Partition result;
  result.hierarchical = true;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t i = groups[g].layers.first, j = groups[g].layers.last + 1, m = groups[g].replicas;
    const std::vector<PartitionStage> inner = machine_partition(intra, i, j, devices, replicate);
    const double sync_s = weight_sync_s(m, inter.params_bytes(i, j), inter.link());
    const double group_s = std::max(bottleneck_of(intra, inner), sync_s) / static_cast<double>(m);
    result.bottleneck_s = std::max(result.bottleneck_s, group_s);
    if (g > 0) result.bottleneck_s = std::max(result.bottleneck_s, inter.cut_s(i));
    for (PartitionStage s : inner) {
      s.replicas *= m;
      s.time_s /= static_cast<double>(m);
      s.group = static_cast<int64_t>(g);
      s.machines = m;
      result.stages.push_back(s);
    }
  }
  fill_memory(inter, result.stages);  // 1F1B over the flattened pipeline
  return result;
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
    const Fitter fits = [&](double x) {
      return fit_machines(costs, intra, x, machines, per_machine, options.replicate);
    };
    Partition h = expand_groups(costs, intra, bisect(lo, x_any, fits), per_machine, options.replicate);
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
  auto fitter = [&](StageCount c, int64_t k) -> Fitter {
    return [&costs, workers, max_replicas, c, k](double x) { return fit(costs, x, workers, max_replicas, c, k); };
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
  // for every K, each partition charged the factor of its own stage count.
  // The most stages allowed give the least bottleneck b_min, so no K with
  // b_min · factor(K) at or above the best so far can win, nor can any larger
  // K (the factor grows with K): the loop stops there.
  result.bottleneck_s = std::numeric_limits<double>::infinity();
  const int64_t first_k = options.stages > 0 ? options.stages : 1;
  double least_bottleneck_s = 0;
  if (count_limit > first_k) {
    const Fitter fits_most = fitter(count, count_limit);
    least_bottleneck_s = bottleneck_of(costs, bisect(lo, fits_most(hi).empty() ? x_any : hi, fits_most, reached));
  }
  for (int64_t k = first_k; k <= count_limit; ++k) {
    if (least_bottleneck_s * gpipe_factor(k, options.microbatches, profile.batch_size) >= result.bottleneck_s) break;
    const Fitter fits_k = fitter(count, k);
    if (fits_k(x_any).empty()) continue;
    std::vector<PartitionStage> stages = bisect(lo, fits_k(hi).empty() ? x_any : hi, fits_k, reached);
    const int64_t used = static_cast<int64_t>(stages.size());
    const double value = bottleneck_of(costs, stages) * gpipe_factor(used, options.microbatches, profile.batch_size);
    if (value < result.bottleneck_s) {
      result.bottleneck_s = value;
      result.stages = std::move(stages);
    }
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
