// cgdp chunk searches; see chunk.hpp. The exact search is a dynamic program
// over chunk boundaries keeping Pareto fronts of flow-shop states; the uniform
// sweep and Algorithm 1 follow seed 003 §4.2.
#include "sim/search/chunk.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "model/error.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// (backward clock, end of the latest job on each resource); at most 4 resources.
constexpr size_t kMaxStateSize = 5;
using FlowState = std::array<double, kMaxStateSize>;

struct StateNode {
  FlowState state{};
  int32_t parent = -1;    // node the last chunk extended, -1 at the start
  int64_t boundary = 0;   // layers consumed from the top (backward order)
};

bool dominates(const FlowState& a, const FlowState& b, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (a[i] > b[i]) return false;
  }
  return true;
}

// Adds `candidate` to `front` (and to `pool`) unless a member is at least as
// good in every coordinate; drops the members it dominates.
void insert_pareto(std::vector<int32_t>& front, std::vector<StateNode>& pool, const StateNode& candidate,
                   size_t size) {
  for (int32_t member : front) {
    if (dominates(pool[static_cast<size_t>(member)].state, candidate.state, size)) return;
  }
  std::erase_if(front, [&](int32_t member) {
    return dominates(candidate.state, pool[static_cast<size_t>(member)].state, size);
  });
  front.push_back(static_cast<int32_t>(pool.size()));
  pool.push_back(candidate);
}

// One chunk of `backward_s` backward and `bytes` gradients after `from`
// (EQUATIONS.md §7, as cgdp_backward_s steps it): t_bp, then t_as and the
// flow shop D2H → accumulate [→ AllReduce] → H2D when it has gradients.
FlowState extend_state(const FlowState& from, double backward_s, double bytes, const Cluster& cluster,
                       const std::vector<int64_t>& per_machine) {
  FlowState to = from;
  to[0] += backward_s;
  if (bytes <= 0) return to;
  to[0] += cluster.host.stream_sync_s;
  const std::vector<double> stages = cgdp_chunk_stage_s(bytes, cluster, per_machine);
  double end_s = to[0];
  for (size_t k = 0; k < stages.size() && k + 1 < kMaxStateSize; ++k) {
    end_s = std::max(end_s, to[k + 1]) + stages[k];
    to[k + 1] = end_s;
  }
  return to;
}

std::vector<LayerRange> chunks_of(const std::vector<StateNode>& pool, int32_t last, int64_t layer_count) {
  std::vector<LayerRange> chunks;  // built from the first layer up: the path runs from the end back
  for (int32_t node = last; pool[static_cast<size_t>(node)].parent >= 0; node = pool[static_cast<size_t>(node)].parent) {
    const int64_t upper = pool[static_cast<size_t>(pool[static_cast<size_t>(node)].parent)].boundary;
    const int64_t lower = pool[static_cast<size_t>(node)].boundary;
    chunks.push_back({layer_count - lower, layer_count - upper - 1});
  }
  return chunks;
}

}  // namespace

// EQUATIONS.md §7 / seed 003 §4.1: min over contiguous chunkings of T.
Chunking exact_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  TRAINSIM_CHECK(n >= 1, "a profile has layers");
  const std::vector<int64_t> per_machine = workers_per_machine(cluster, workers);
  const size_t size = 1 + cgdp_chunk_stage_s(1.0, cluster, per_machine).size();
  TRAINSIM_CHECK(size <= kMaxStateSize, "cgdp has at most four resources");
  std::vector<StateNode> pool = {StateNode{}};
  std::vector<std::vector<int32_t>> fronts(static_cast<size_t>(n + 1));
  fronts[0] = {0};
  for (int64_t b = 0; b < n; ++b) {
    for (int32_t from : fronts[static_cast<size_t>(b)]) {
      double backward_s = 0;
      double bytes = 0;
      for (int64_t next = b + 1; next <= n; ++next) {
        const LayerProfile& layer = profile.layers[static_cast<size_t>(n - next)];
        backward_s += layer.backward_s;
        bytes += layer.param_bytes;
        const StateNode candidate{
            extend_state(pool[static_cast<size_t>(from)].state, backward_s, bytes, cluster, per_machine), from, next};
        insert_pareto(fronts[static_cast<size_t>(next)], pool, candidate, size);
      }
    }
    fronts[static_cast<size_t>(b)].clear();
  }
  int32_t best = -1;
  double best_s = std::numeric_limits<double>::infinity();
  for (int32_t node : fronts[static_cast<size_t>(n)]) {
    const FlowState& s = pool[static_cast<size_t>(node)].state;
    const double t_s = std::max(s[0], s[size - 1]);
    if (t_s < best_s) {
      best_s = t_s;
      best = node;
    }
  }
  Chunking result;
  result.chunks = chunks_of(pool, best, n);
  result.backward_s = cgdp_backward_s(profile, cluster, workers, result.chunks);
  return result;
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

namespace {

// Wall time of `interval` iterations of cgdp at chunk size `chunk_size`, as the
// simulator plays the plan (the seed's lapse, Algorithm 1 line 13).
double simulated_lapse_s(const Profile& profile, const Cluster& cluster, int64_t workers, int64_t chunk_size,
                         const HeuristicChunkOptions& options, uint64_t seed) {
  StrategyConfig config;
  config.set("workers", std::to_string(workers), "--workers");
  config.set("chunk_size", std::to_string(chunk_size), "chunk size");
  const Plan plan = generate_plan(find_strategy("cgdp", "--strategy"), profile, cluster, config, options.interval);
  SimOptions sim;
  sim.jitter = options.jitter;
  sim.seed = seed;
  return simulate_plan(plan, cluster, sim).makespan_s;
}

}  // namespace

// Seed 003 §4.2, Algorithm 1 (lines 7-25), one lapse per interval.
HeuristicChunkResult heuristic_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers,
                                             const HeuristicChunkOptions& options) {
  if (options.step < 1) throw InputError("--step", "is " + std::to_string(options.step), "at least 1");
  if (options.range < 1) throw InputError("--range", "is " + std::to_string(options.range), "at least 1");
  const int64_t with_params = std::count_if(profile.layers.begin(), profile.layers.end(),
                                            [](const LayerProfile& l) { return l.param_bytes > 0; });
  HeuristicChunkResult result;
  double lapse_min_s = std::numeric_limits<double>::infinity();
  int64_t chunk = 1;
  while (chunk < result.best_chunk_size + options.step * options.range && chunk <= std::max<int64_t>(with_params, 1)) {
    const uint64_t seed = options.seed + static_cast<uint64_t>(result.trials.size());
    const double lapse_s = with_params == 0 ? 0.0 : simulated_lapse_s(profile, cluster, workers, chunk, options, seed);
    result.trials.push_back({chunk, lapse_s});
    if (lapse_s < lapse_min_s) {
      lapse_min_s = lapse_s;
      result.best_chunk_size = chunk;
    }
    chunk = chunk < options.step ? chunk + 1 : chunk + options.step;
  }
  result.chunking.chunks = seed_chunk_layout(profile, result.best_chunk_size);
  result.chunking.backward_s = cgdp_backward_s(profile, cluster, workers, result.chunking.chunks);
  return result;
}

}  // namespace trainsim
