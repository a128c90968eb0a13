// The cgdp chunking problem in the form the searches use (sim/search/chunk.cpp):
// prefix sums over the layers in backward order, the chunk's flow-shop stages
// as affine functions of its bytes, and the state a chunking leaves behind.
// Internal to sim/search; the public searches are in chunk.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim::chunk_detail {

// (backward clock, end of the latest job on each resource); at most 4 resources.
constexpr size_t kMaxStateSize = 5;
using FlowState = std::array<double, kMaxStateSize>;

// One cgdp step of the cost model (cgdp_backward_s, docs/equations.md §7) for a
// chunk: t_bp, then t_as and the flow shop D2H → accumulate [→ AllReduce] → H2D
// when the chunk has gradients. Every stage is latency + bytes · rate
// (cgdp_chunk_stage_s), so it is kept as intercept and slope.
struct ChunkFlow {
  size_t resources = 0;                   // 3, or 4 across machines
  std::array<double, 4> intercept_s{};    // the stage's time at 0 bytes
  std::array<double, 4> slope_s_per_byte{};
  double sync_s = 0;                      // host.stream_sync_s, t_as

  ChunkFlow(const Cluster& cluster, int64_t workers);
  size_t state_size() const { return resources + 1; }
  double stage_s(size_t r, double bytes) const { return intercept_s[r] + slope_s_per_byte[r] * bytes; }
  // The state after one more chunk of `backward_s` and `bytes` after `from`.
  FlowState extend(const FlowState& from, double backward_s, double bytes) const;
  // T = max(clock, end of the last resource).
  double finish_s(const FlowState& s) const { return std::max(s[0], s[resources]); }
};

// Σ backward_s and Σ param_bytes of the first b layers in backward order (the
// last b layers of the profile), b = 0..n.
struct BackwardPrefix {
  std::vector<double> backward_s;
  std::vector<double> bytes;
  explicit BackwardPrefix(const Profile& profile);
  int64_t layer_count() const { return static_cast<int64_t>(backward_s.size()) - 1; }
};

// The boundaries, in layers consumed from the top, after which a chunk may end
// without losing optimality: the chunk's lowest layer has parameters (b = n − p
// for each parameter layer p), or it is layer 0 (b = n). A chunk whose lowest
// layers have no parameters is ready later than the same chunk without them,
// while the chunk below, which takes them, is ready no later (the clock is the
// same sum); every later quantity is non-decreasing in both, so moving them
// down never costs. Ascending; the last is n.
std::vector<int64_t> candidate_boundaries(const Profile& profile);

// T of the chunking that ends chunks at `boundaries` (ascending, last = n).
double chunking_finish_s(const ChunkFlow& flow, const BackwardPrefix& prefix, const std::vector<int64_t>& boundaries);

// The chunks, ascending in layers, of chunk ends `boundaries` in backward order.
std::vector<LayerRange> chunks_of_boundaries(const std::vector<int64_t>& boundaries, int64_t layer_count);

// A lower bound on T over every chunking (the gap a bounded search reports):
// the largest of Σbw + t_as (backward and at least one sync);
// the backward down to the lowest parameter layer p0, t_as, and p0's own bytes
// through every resource (the chunk holding p0 carries at least them); and for
// each resource r, the first chunk's earliest arrival at r (through the top
// parameter layer, with its bytes on the resources before r), all bytes on r
// (Σ_c (a + s·b_c) ≥ a + s·Σb), and p0's bytes on the resources after r.
double chunking_lower_bound_s(const ChunkFlow& flow, const Profile& profile);

}  // namespace trainsim::chunk_detail
