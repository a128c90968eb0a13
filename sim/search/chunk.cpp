// cgdp chunk searches; see chunk.hpp. The exact search is a dynamic program
// over chunk boundaries keeping Pareto fronts of flow-shop states, the bounded
// one the same on fewer boundaries followed by a local search; the uniform
// sweep follows seed 003 §4.2.
#include "sim/search/chunk.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "model/error.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/search/chunk_flow.hpp"

namespace trainsim {
namespace {

using chunk_detail::BackwardPrefix;
using chunk_detail::ChunkFlow;
using chunk_detail::FlowState;

struct StateNode {
  FlowState state{};
  int32_t parent = -1;  // node the last chunk extended, -1 at the start
  int32_t cut = -1;     // index into the candidate boundaries of the chunk's end, -1 at the start
};

bool dominates(const FlowState& a, const FlowState& b, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (a[i] > b[i]) return false;
  }
  return true;
}

// The Pareto dynamic program of exact_cgdp_chunking restricted to chunk ends
// in `cuts` (ascending boundaries in layers consumed from the top, last = n):
// the least T over those chunkings, or nullopt once the comparisons between
// states, plus the states kept, pass `work_budget`, or the states kept pass
// kMaxChunkStates.
std::optional<std::vector<int64_t>> pareto_boundaries(const ChunkFlow& flow, const BackwardPrefix& prefix,
                                                      const std::vector<int64_t>& cuts, int64_t work_budget) {
  const size_t size = flow.state_size();
  const size_t m = cuts.size();
  std::vector<StateNode> pool = {StateNode{}};
  std::vector<std::vector<int32_t>> fronts(m);
  int64_t work = 0;
  // Extends every state ending at boundary `from_b` by each chunk up to a later cut.
  auto extend_all = [&](int32_t from, int64_t from_b, size_t first_cut) {
    for (size_t j = first_cut; j < m; ++j) {
      const size_t a = static_cast<size_t>(from_b), b = static_cast<size_t>(cuts[j]);
      const FlowState next = flow.extend(pool[static_cast<size_t>(from)].state,
                                         prefix.backward_s[b] - prefix.backward_s[a], prefix.bytes[b] - prefix.bytes[a]);
      std::vector<int32_t>& front = fronts[j];
      work += static_cast<int64_t>(front.size()) + 1;
      if (work > work_budget || pool.size() >= kMaxChunkStates) return false;
      const bool dominated = std::any_of(front.begin(), front.end(), [&](int32_t member) {
        return dominates(pool[static_cast<size_t>(member)].state, next, size);
      });
      if (dominated) continue;
      std::erase_if(front, [&](int32_t member) { return dominates(next, pool[static_cast<size_t>(member)].state, size); });
      front.push_back(static_cast<int32_t>(pool.size()));
      pool.push_back({next, from, static_cast<int32_t>(j)});
    }
    return true;
  };
  if (!extend_all(0, 0, 0)) return std::nullopt;
  for (size_t i = 0; i + 1 < m; ++i) {
    for (int32_t from : fronts[i]) {
      if (!extend_all(from, cuts[i], i + 1)) return std::nullopt;
    }
    fronts[i].clear();
  }
  int32_t best = -1;
  double best_s = std::numeric_limits<double>::infinity();
  for (int32_t node : fronts[m - 1]) {
    const double t_s = flow.finish_s(pool[static_cast<size_t>(node)].state);
    if (t_s < best_s) {
      best_s = t_s;
      best = node;
    }
  }
  std::vector<int64_t> boundaries;
  for (int32_t node = best; node != 0; node = pool[static_cast<size_t>(node)].parent) {
    boundaries.push_back(cuts[static_cast<size_t>(pool[static_cast<size_t>(node)].cut)]);
  }
  std::reverse(boundaries.begin(), boundaries.end());
  return boundaries;
}

// At most groups + 1 of the candidate boundaries: the first in each of
// `groups` equal slices of the backward time (of the positions where the
// profile has no backward time), and n.
std::vector<int64_t> coarse_cuts(const std::vector<int64_t>& cuts, const BackwardPrefix& prefix, int64_t groups) {
  const double total_s = prefix.backward_s.back();
  std::vector<int64_t> kept;
  int64_t last_group = -1;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const double progress = total_s > 0 ? prefix.backward_s[static_cast<size_t>(cuts[i])] / total_s
                                        : static_cast<double>(i + 1) / static_cast<double>(cuts.size());
    const int64_t group = std::min<int64_t>(groups - 1, static_cast<int64_t>(progress * static_cast<double>(groups)));
    if (group > last_group) {
      kept.push_back(cuts[i]);
      last_group = group;
    }
  }
  if (kept.back() != cuts.back()) kept.push_back(cuts.back());
  return kept;
}

// Local search over the candidate boundaries from `boundaries`: move one chunk
// end anywhere between its neighbours, drop it, or add one; the best change of
// a sweep is kept while it lowers T, for at most `evaluation_budget` chunkings.
std::vector<int64_t> refine_boundaries(const ChunkFlow& flow, const BackwardPrefix& prefix,
                                       const std::vector<int64_t>& cuts, std::vector<int64_t> boundaries,
                                       int64_t evaluation_budget) {
  double best_s = chunk_detail::chunking_finish_s(flow, prefix, boundaries);
  int64_t evaluations = 0;
  bool improved = true;
  while (improved && evaluations < evaluation_budget) {
    improved = false;
    std::vector<int64_t> best_change;
    auto consider = [&](std::vector<int64_t> candidate) {
      ++evaluations;
      const double t_s = chunk_detail::chunking_finish_s(flow, prefix, candidate);
      if (t_s < best_s * (1 - 1e-12)) {
        best_s = t_s;
        best_change = std::move(candidate);
      }
    };
    for (size_t c = 0; c + 1 < boundaries.size() && evaluations < evaluation_budget; ++c) {
      std::vector<int64_t> without = boundaries;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(c));
      consider(without);
      const int64_t lower = c == 0 ? 0 : boundaries[c - 1];
      for (int64_t cut : cuts) {
        if (cut <= lower || cut >= boundaries[c + 1] || cut == boundaries[c]) continue;
        std::vector<int64_t> moved = boundaries;
        moved[c] = cut;
        consider(moved);
      }
    }
    for (int64_t cut : cuts) {
      if (evaluations >= evaluation_budget) break;
      if (std::binary_search(boundaries.begin(), boundaries.end(), cut)) continue;
      std::vector<int64_t> added = boundaries;
      added.insert(std::upper_bound(added.begin(), added.end(), cut), cut);
      consider(added);
    }
    if (!best_change.empty()) {
      boundaries = std::move(best_change);
      improved = true;
    }
  }
  return boundaries;
}

Chunking chunking_from(const Profile& profile, const Cluster& cluster, int64_t workers,
                       const std::vector<int64_t>& boundaries, double lower_bound_s, bool optimal) {
  Chunking result;
  result.chunks = chunk_detail::chunks_of_boundaries(boundaries, static_cast<int64_t>(profile.layers.size()));
  result.backward_s = cgdp_backward_s(profile, cluster, workers, result.chunks);
  result.lower_bound_s = optimal ? result.backward_s : std::min(lower_bound_s, result.backward_s);
  result.optimal = optimal;
  return result;
}

}  // namespace

// docs/equations.md §7 / seed 003 §4.1: min over contiguous chunkings of T.
std::optional<Chunking> exact_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers,
                                            int64_t work_budget) {
  TRAINSIM_CHECK(!profile.layers.empty(), "a profile has layers");
  const ChunkFlow flow(cluster, workers);
  const BackwardPrefix prefix(profile);
  const std::optional<std::vector<int64_t>> boundaries =
      pareto_boundaries(flow, prefix, chunk_detail::candidate_boundaries(profile), work_budget);
  if (!boundaries) return std::nullopt;
  return chunking_from(profile, cluster, workers, *boundaries, 0, true);
}

Chunking bounded_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers, int64_t work_budget) {
  if (std::optional<Chunking> exact = exact_cgdp_chunking(profile, cluster, workers, work_budget)) return *exact;
  const ChunkFlow flow(cluster, workers);
  const BackwardPrefix prefix(profile);
  const std::vector<int64_t> cuts = chunk_detail::candidate_boundaries(profile);
  // Eight groups leave at most nine boundaries, 2^8 chunkings: the halving
  // ends there with a chunking whatever the budget.
  std::optional<std::vector<int64_t>> coarse;
  for (int64_t groups = kCoarseChunkGroups; !coarse; groups /= 2) {
    coarse = pareto_boundaries(flow, prefix, coarse_cuts(cuts, prefix, std::max<int64_t>(groups, 8)),
                               groups <= 8 ? std::numeric_limits<int64_t>::max() : work_budget);
  }
  const std::vector<int64_t> refined = refine_boundaries(flow, prefix, cuts, *coarse, work_budget / 64);
  return chunking_from(profile, cluster, workers, refined, chunk_detail::chunking_lower_bound_s(flow, profile), false);
}

std::vector<UniformChunkPoint> uniform_chunk_sweep(const Profile& profile, const Cluster& cluster, int64_t workers) {
  const int64_t with_params = std::count_if(profile.layers.begin(), profile.layers.end(),
                                            [](const LayerProfile& l) { return l.param_bytes > 0; });
  std::vector<UniformChunkPoint> points;
  for (int64_t k = 1; k <= with_params; ++k) {
    UniformChunkPoint point;
    point.chunk_size = k;
    point.chunking.chunks = seed_chunk_layout(profile, k);
    point.chunking.backward_s = cgdp_backward_s(profile, cluster, workers, point.chunking.chunks);
    points.push_back(std::move(point));
  }
  return points;
}

}  // namespace trainsim
