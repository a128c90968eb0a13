// Partition search: PipeDream's dynamic program (docs/equations.md §4) choosing
// contiguous layer ranges and their replication so that the slowest stage or
// boundary of the chosen schedule is as fast as possible, optionally with a
// fixed stage count and no replication ("straight").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// The schedule whose steady-state time the search minimises. With C_k =
// F_k + B_k + U_k, w_k the stage's weight bytes, r_k its replicas, B the link
// and a_b the bytes crossing boundary b (boundary_bytes, skip edges included):
//   one_f_one_b: max(max_k max(C_k, W^r_k)/r_k, max_b 2·(a_b/B + latency))   (§4)
//   dualpipe:    max(max_k max(C_k, W^r_k)/r_k, max_b (a_b/B + latency))     (§5, seed 000:
//                one unit of F+B per mini-batch, the update phase folded into C_k;
//                the forward and backward messages of a unit travel concurrently)
//   gpipe:       (M+K-1)/M · the one_f_one_b bottleneck, K stages, M micro-batches (§5's bubble)
//   dsp:         max(max_k (C_k + R_k), max_b 2·(a_b/B + latency)), R_k = F_k but
//                0 on the last block (seed 001 §3.3, as sim/cost/dsp.cpp); never replicated
// A partition is feasible only when every stage's per-device memory, as the
// schedule's cost model computes it (sim/cost/stages.hpp), is within the limit:
//   one_f_one_b: 3w_k + n_k·(a_k + i_k) + ws_k + (n_k - 1)·w_k, n_k = ⌈(r_k + later workers)/r_k⌉
//                (weight_stashing_memory, docs/equations.md §4)
//   dualpipe:    3w_k + n_k·(a_k + i_k) + ws_k + 3w_k (SpecTrain, on by default),
//                n_k = ⌈(2·later stages + 1)/r_k⌉ (sim/cost/dualpipe.cpp)
//   gpipe:       3w_k + (a_k + i_k)/r_k + ws_k (each replica keeps its share of the
//                micro-batches, sim/cost/gpipe.cpp)
//   dsp:         3w_k + a_k + i_k + ws_k + m_k·i_k + (2 + p_k + q_k)·o_k with the default
//                queues DSP(1,...,1,0; 2(K-1),...,2,0) (sim/cost/dsp.cpp)
// with a_k the stage's activations, i_k / o_k the bytes entering / leaving it and
// ws_k its largest workspace.
enum class PartitionObjective { kOneFOneB, kDualPipe, kGPipe, kDsp };

// "pipedream" | "dualpipe" | "gpipe" | "dsp"; InputError naming `where` otherwise.
PartitionObjective parse_partition_objective(const std::string& name, const std::string& where);

struct PartitionOptions {
  PartitionObjective objective = PartitionObjective::kOneFOneB;
  int64_t workers = 0;        // devices available; 0 = every device of the cluster
  int64_t stages = 0;         // 0 = free; K > 0 = exactly K stages of one replica (straight)
  bool replicate = true;      // allow r_k > 1 (ignored with stages > 0 and for dsp)
  int64_t microbatches = 0;   // GPipe's M; 0 = min(4·K, batch_size) per candidate K (as resolve_microbatches)
  // Per-device memory limit in bytes: 0 = the cluster device's memory_bytes,
  // negative or infinite = no limit.
  double memory_limit_bytes = 0;
  // PipeDream's two-level search on clusters of several machines (pipedream
  // objective, free stage count, workers a multiple of devices_per_machine);
  // false = the flat search charging the slower link everywhere.
  bool hierarchical = true;
};

struct PartitionStage {
  LayerRange layers;      // 0-based, inclusive
  int64_t replicas = 1;
  double time_s = 0;      // the stage's term of the objective (before GPipe's bubble factor)
  double memory_bytes = 0;  // peak memory of one device of the stage under the schedule
  int64_t group = 0;        // hierarchical: the machine-level stage (level 2) it belongs to
  int64_t machines = 0;     // hierarchical: machines running that group (0 = flat search)
};

struct Partition {
  std::vector<PartitionStage> stages;
  double bottleneck_s = 0;  // the objective's value, seconds per mini-batch
  bool hierarchical = false;  // stages grouped by machine (PipeDream's two levels)
};

// The limit options.memory_limit_bytes resolves to on `cluster` (infinity = none).
double resolve_memory_limit_bytes(double memory_limit_bytes, const Cluster& cluster);

// The link the search charges boundaries and weight synchronisation on: the
// intra-machine link on one machine, else the (slower) inter-machine link.
const LinkSpec& partition_link(const Cluster& cluster);

// Hierarchical (docs/equations.md §4 "Hierarchical", PipeDream SOSP'19 §3.1): with
// D devices per machine and S machines, level 1 gives A¹(i→j), the optimal
// bottleneck of layers i..j on one machine's D devices over the intra link;
// level 2 splits the model into groups, group g run by m_g whole machines:
//   max(max_g max(A¹_g, W^{m_g} on the inter link)/m_g, max_b 2·(a_b/B_inter + latency)).
// Each flattened stage reports replicas = r·m_g, time_s = its level-1 term / m_g,
// its group and m_g, and 1F1B memory over the flattened pipeline; when that
// exceeds the limit the flat search answers instead. The level-2 bisection
// tests a bottleneck x with S level-1 reach passes (y = m·x, m = 1..S), each
// O(D²·N), and an O(N·S²) suffix recursion: O(S·D²·N·log(1/ε)) in all, plus one
// level-1 search per group at the end.
// The optimal partition under `options.objective`, equal to §4's A(N, M)
// recursion. Instead of the O(N²·M²) table it bisects on the bottleneck X:
// for a given X a suffix recursion finds the fewest workers that keep every
// stage and boundary within X, in O(N·M) using prefix sums and the
// monotonicity of both the suffix cost and the stage cost in its range. The
// whole search is O(N·M·log(1/ε)) (ε = 1e-12 relative), straight mode
// O(N·K·log(1/ε)), GPipe O(K_max²·N·M·log(1/ε)). Ties: fewer workers. In
// straight mode each level computes only the starts its stages can reach
// from both ends within X (a band that narrows as X nears the optimum), and
// GPipe bisects a stage count only when one fit shows it can win.
// The memory limit keeps the suffix recursion exact (a stage's memory depends
// only on its range, its replicas and the workers or stages after it, and
// grows with each), at an extra O(log M) where the limit binds; DualPipe's
// memory counts the later stages, so with a limit it runs one recursion level
// per stage count, O(K_max·N·M·log(1/ε)); DSP's depends on the bytes leaving a
// stage, so every end is tried, O(N²·log(1/ε)) at worst.
// InputError naming --stages / --workers when they do not fit the model, and
// --memory-limit when no partition fits it (with the smallest peak possible).
Partition search_partition(const Profile& profile, const Cluster& cluster, const PartitionOptions& options);

// Fixed stages (contiguous, covering every layer in order): the best replica
// counts for them under options.objective over options.workers (flat search's
// link, memory limit as above; stages/hierarchical ignored), by the same
// bisection with each stage's fewest replicas taken from the last stage back.
// InputError naming `where` when the ranges are not such a cover or need more
// workers than there are, --memory-limit when no replication fits.
Partition evaluate_partition(const Profile& profile, const Cluster& cluster, const std::vector<LayerRange>& ranges,
                             const PartitionOptions& options, const std::string& where);

}  // namespace trainsim
