// Partition search: PipeDream's dynamic program (EQUATIONS.md §4) choosing
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
enum class PartitionObjective { kOneFOneB, kDualPipe, kGPipe, kDsp };

// "pipedream" | "dualpipe" | "gpipe" | "dsp"; InputError naming `where` otherwise.
PartitionObjective parse_partition_objective(const std::string& name, const std::string& where);

struct PartitionOptions {
  PartitionObjective objective = PartitionObjective::kOneFOneB;
  int64_t workers = 0;        // devices available; 0 = every device of the cluster
  int64_t stages = 0;         // 0 = free; K > 0 = exactly K stages of one replica (straight)
  bool replicate = true;      // allow r_k > 1 (ignored with stages > 0 and for dsp)
  int64_t microbatches = 0;   // GPipe's M; 0 = min(4·K, batch_size) per candidate K (as resolve_microbatches)
};

struct PartitionStage {
  LayerRange layers;      // 0-based, inclusive
  int64_t replicas = 1;
  double time_s = 0;      // the stage's term of the objective (before GPipe's bubble factor)
};

struct Partition {
  std::vector<PartitionStage> stages;
  double bottleneck_s = 0;  // the objective's value, seconds per mini-batch
};

// The link the search charges boundaries and weight synchronisation on: the
// intra-machine link on one machine, else the (slower) inter-machine link.
const LinkSpec& partition_link(const Cluster& cluster);

// The optimal partition under `options.objective`, equal to §4's A(N, M)
// recursion. Instead of the O(N²·M²) table it bisects on the bottleneck X:
// for a given X a suffix recursion finds the fewest workers that keep every
// stage and boundary within X, in O(N·M) using prefix sums and the
// monotonicity of both the suffix cost and the stage cost in its range. The
// whole search is O(N·M·log(1/ε)) (ε = 1e-12 relative), straight mode
// O(N·K·log(1/ε)), GPipe O(K_max²·N·M·log(1/ε)). Ties: fewer workers.
// InputError naming --stages / --workers when they do not fit the model.
Partition search_partition(const Profile& profile, const Cluster& cluster, const PartitionOptions& options);

}  // namespace trainsim
