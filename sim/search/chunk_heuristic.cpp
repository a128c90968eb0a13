// Seed 003's Algorithm 1 against the simulator; see chunk_heuristic.hpp.
#include "sim/search/chunk_heuristic.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "model/error.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
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
