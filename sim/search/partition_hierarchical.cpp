// PipeDream's hierarchical partition search (docs/equations.md §4,
// "Hierarchical"; partition.hpp): level 1 splits a layer range over the
// devices of one machine on the intra link; level 2 splits the model into
// ranges each run by whole machines, T = (1/m)·max(A¹(range), W^m on the
// inter link), boundaries on the inter link.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/cost/stages.hpp"
#include "sim/search/partition.hpp"
#include "sim/search/partition_costs.hpp"

namespace trainsim::partition_detail {
namespace {

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

}  // namespace

Partition hierarchical_partition(const Costs& inter, const Costs& intra, double lo, double hi, int64_t machines,
                                 int64_t devices, bool replicate) {
  const Fitter fits = [&](double x) { return fit_machines(inter, intra, x, machines, devices, replicate); };
  return expand_groups(inter, intra, bisect(lo, hi, fits), devices, replicate);
}

}  // namespace trainsim::partition_detail
