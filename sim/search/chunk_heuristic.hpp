// Seed 003's runtime chunk-size search, Algorithm 1 (§4.2): chunk sizes in
// the seed's layout (seed_chunk_layout), each run against lapses the
// discrete-event simulator measures on the cgdp plan.
#pragma once

#include <cstdint>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/search/chunk.hpp"

namespace trainsim {

// Algorithm 1's settings (seed 003 §4.2); the defaults are the seed's worked
// example (§5.3: step 10, range 5), interval fixed at 10 as in the seed.
struct HeuristicChunkOptions {
  int64_t step = 10;
  int64_t range = 5;
  int32_t interval = 10;  // iterations per lapse
  double jitter = 0;      // relative standard deviation of compute times in the simulator
  uint64_t seed = 1;      // the k-th lapse is simulated with seed + k
};

struct HeuristicChunkTrial {
  int64_t chunk_size = 0;
  double lapse_s = 0;  // simulated wall time of `interval` iterations at this chunk size
};

struct HeuristicChunkResult {
  int64_t best_chunk_size = 1;
  Chunking chunking;                       // best_chunk_size's layout and its cost-model T
  std::vector<HeuristicChunkTrial> trials; // in the order the algorithm ran them
};

// Algorithm 1: chunk, best_chunk = 1, lapse_min = +∞; each interval, stop if
// chunk ≥ best_chunk + step·range, else time `interval` iterations of the cgdp
// plan at chunk size `chunk` (generate_plan + simulate_plan, one lapse each),
// keep the best, then chunk += 1 while chunk < step, else += step. Also stops
// when chunk passes the l parameter layers, where the seed's layout ends.
// InputError naming --step or --range if either is below 1.
HeuristicChunkResult heuristic_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers,
                                             const HeuristicChunkOptions& options);

}  // namespace trainsim
