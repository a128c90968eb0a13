// Gradient-sync chunking for cgdp (seed 003 §4, docs/equations.md §7): the exact
// optimal contiguous chunking under the cgdp cost model, a bounded search for
// profiles where it is too costly, and the seed's sweep over uniform chunk
// sizes (its figure 2). The seed's runtime Algorithm 1 (§4.2), which times
// plans in the simulator, is chunk_heuristic.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// A chunking and the backward time T the cgdp cost model gives it
// (cgdp_backward_s, seconds from the start of backward).
struct Chunking {
  std::vector<LayerRange> chunks;  // ascending, covering every layer
  double backward_s = 0;
  bool optimal = true;      // false: a bounded search's best, not proven optimal
  // A proven lower bound on the least T of any chunking: backward_s when
  // optimal, else chunking_lower_bound_s, so backward_s / lower_bound_s − 1
  // bounds how far the chunking can be from the optimum.
  double lower_bound_s = 0;
  // backward_s / lower_bound_s − 1: 0 when optimal.
  double optimality_gap() const { return lower_bound_s > 0 ? backward_s / lower_bound_s - 1 : 0.0; }
};

// The work the searches may spend: comparisons between flow-shop states plus
// states kept (a few ns each). The default is what `auto` (and cgdp's default
// chunking) gives the exact search before it coarsens; `--method exact` gets
// the larger one (resnet152 needs more than 32 M and takes 0.2 s).
inline constexpr int64_t kChunkWorkBudget = 4'000'000;
inline constexpr int64_t kExactChunkWorkBudget = 1'000'000'000;
// Flow-shop states a search may keep (48 bytes each, about 200 MB): past them
// it gives up as past its work budget.
inline constexpr size_t kMaxChunkStates = 4'000'000;
// The bounded search's first coarsening: at most this many chunk ends, halved
// until the exact search on them fits the budget.
inline constexpr int64_t kCoarseChunkGroups = 256;

// The contiguous chunking with the least T on `workers` devices (1 to
// device_count(cluster)), over all 2^(n-1) chunkings of the n layers, found
// without enumerating them: a dynamic program over chunk boundaries in
// backward order. A chunk ends only where its lowest layer has parameters (or
// at layer 0): moving parameterless layers from a chunk's bottom to the chunk
// below never costs (chunk_flow.hpp), so that loses no optimum. The state
// after a prefix of chunks is the vector (backward clock, end of the last job
// on each flow-shop resource); the next chunk maps it to a new state by max
// and + only, so every coordinate of the result, and T = max(clock, last
// resource end), is non-decreasing in every coordinate of the state. A state
// dominated componentwise by another at the same boundary can therefore never
// finish earlier and is dropped: each boundary keeps only its Pareto front,
// which makes the search exact.
// Time O(l² · F² · R) and memory O(l · F), with l the layers with parameters,
// F the largest front and R the resources (3, or 4 across machines). F is 1
// when the stream sync dominates and stays small on most profiles (tens on
// resnet152), but it is bounded only by the chunkings of the prefix, 2^(i-1):
// the problem contains flow-shop sequencing with release times. So the search
// gives up (nullopt) once its work passes `work_budget`.
// Ties go to the first chunking found (fewer, larger chunks at the top).
std::optional<Chunking> exact_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers,
                                            int64_t work_budget = kChunkWorkBudget);

// The exact chunking where its search fits `work_budget`; otherwise the same
// search over fewer chunk ends (kCoarseChunkGroups, halved until it fits, down
// to 8 slices of equal backward time, which always fit), then a local search
// over every chunk end (move one, drop one, add one; best change per sweep,
// at most work_budget / 64 chunkings priced). The result carries a proven
// lower bound on the optimum, so its gap is stated. Work: at most about 7
// budgets and the local search, whatever the profile.
Chunking bounded_cgdp_chunking(const Profile& profile, const Cluster& cluster, int64_t workers,
                               int64_t work_budget = kChunkWorkBudget);

// One point of the seed's uniform sweep: chunk size k laid out by
// seed_chunk_layout (⌊l/k⌋ chunks of k parameter layers from the last down,
// the first few layers one per chunk).
struct UniformChunkPoint {
  int64_t chunk_size = 0;
  Chunking chunking;
};

// Chunk sizes 1..l, l the layers with parameters (seed 003 figure 2 plots
// 1..100 for ResNet-152). Empty when no layer has parameters.
std::vector<UniformChunkPoint> uniform_chunk_sweep(const Profile& profile, const Cluster& cluster, int64_t workers);

}  // namespace trainsim
