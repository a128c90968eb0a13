// Pieces the data-parallel cost models share (dp-ps, dp-ring, dp-overlap,
// pipesgd, cgdp, parallax): the common prediction skeleton, the `algorithm`
// key, gradient buckets in backward order, the in-order pipeline of transfer
// stages, where workers sit on the machines, the per-strategy times that the
// searches of sim/search price (dp-overlap's buckets, pipesgd's segments,
// cgdp's chunks), and the defaults and byte counts that the plans (sim/plan)
// read as well. The settings those searches choose: data_parallel_settings.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// A synchronous data-parallel prediction: `workers` replicas, each on its own
// batch of profile.batch_size samples; iteration_s = compute_s +
// exposed_comm_s (both per device, every device alike); one full replica
// (replica_memory, one batch of activations) per worker. Strategy buffers are
// added by the caller, which then calls finish_prediction.
Prediction data_parallel_prediction(const std::string& strategy, const Profile& profile, int64_t workers,
                                    double compute_s, double exposed_comm_s);

// Key "algorithm" (default "ring"), one of collective_algorithm_names().
CollectiveAlgorithm read_collective_algorithm(StrategyConfig& config);

// Gradients grouped in backward order (last layer first).
struct GradientGroup {
  int64_t first = 0;   // lowest layer whose gradients are in the group
  int64_t last = 0;    // highest such layer
  double bytes = 0;    // Σ param_bytes of its layers
  double ready_s = 0;  // from the start of backward: when backward has finished layer `first`
};

// Walks the layers from the last to the first adding their gradients to the
// open group, which closes once its bytes reach `group_bytes` (> 0); the last
// group takes what remains. Layers without parameters add nothing, so every
// group has bytes > 0 and no group is formed on a model without parameters.
std::vector<GradientGroup> group_gradients_by_bytes(const Profile& profile, double group_bytes);

// Jobs passing in order through a chain of resources, each serving one job at
// a time in job order (a permutation flow shop): job j enters resource k at
// max(its end on resource k-1 (or ready_s[j] for k = 0), the end of job j-1
// on resource k), and stays stage_s[j][k]. Returns when the last job leaves
// the last resource; 0 without jobs.
double flow_shop_end_s(const std::vector<double>& ready_s, const std::vector<std::vector<double>>& stage_s);

// Workers placed in order on the machines, filling each before the next:
// entry k is how many of the first `workers` devices sit on machine k.
std::vector<int64_t> workers_per_machine(const Cluster& cluster, int64_t workers);

// dp-overlap: "25 MB", PyTorch DDP's bucket size, the first candidate of the
// bucket search.
inline constexpr double kDefaultBucketBytes = 25e6;

// dp-overlap: when the last bucket's AllReduce (+ t_sync) ends, from the start
// of backward, with buckets of `bucket_bytes` (the flow shop of
// predict_dp_overlap); Σ backward_s when nothing is communicated.
double overlap_backward_end_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                              CollectiveAlgorithm algorithm, double bucket_bytes);

// pipesgd's settings and the communication its iteration exposes.
struct PipeSgdSettings {
  int64_t workers = 1;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  int64_t width = 2;                // K
  std::string compression = "none"; // none | trunc16 | quant8
  int64_t segments = 1;             // S
  int64_t warmup = 0;               // first iterations trained synchronously (width 1), seed 002 §4's warm-up
};

// pipesgd: the per-iteration compute (t_up + t_fw + t_bw + compression) and
// the communication left exposed beyond it, docs/equations.md §1 eqs. (2), (5), (6).
struct PipeSgdTimes {
  double compute_s = 0;
  double exposed_s = 0;
};
PipeSgdTimes pipesgd_times(const Profile& profile, const Cluster& cluster, const PipeSgdSettings& settings);

// A plan holds every segment's ops: at most this many segments.
inline constexpr int64_t kMaxPlanSegments = 4096;

// pipesgd: compression then decompression of the gradient vector, each a
// streaming pass that reads one representation and writes the other: read M
// fp32 + write the narrow copy, read it + write M fp32. Counting the narrow
// bytes as full ones (quantization also scans for its range) bounds it at 4
// passes over M at device memory bandwidth.
inline constexpr double kCompressionPassesPerGradientByte = 4.0;

// pipesgd: t_compress of `gradient_bytes` (docs/equations.md §1), the
// kCompressionPassesPerGradientByte bound. 0 without compression, and 0 where
// the cluster gives the codec's rates: ring_codec_s then prices the same
// encode and decode at the ring's first and last hops, and counting both would
// count them twice.
double compression_work_s(const Cluster& cluster, const std::string& compression, double gradient_bytes);

// pipesgd: bytes on the wire per gradient byte: 16-bit truncation halves
// fp32, 8-bit quantization quarters it (seed 002 §3.2); "none" is 1.
double wire_fraction(const std::string& compression);

// cgdp: seed 003 §4.2's chunk layout for chunk size k, over the l layers that
// have parameters (the seed's "layers": AlexNet has 8): from the last layer
// down, ⌊l/k⌋ chunks of k (l/k - 1 when k divides l), then chunks of one layer
// for the few first layers, "to reduce the effect of t_aa and t_bc". Each
// chunk's range runs from its lowest parameter layer up to the next chunk; the
// parameter-free layers below the first parameter layer form a chunk of their
// own that transfers nothing. InputError naming chunk_size if k > l.
std::vector<LayerRange> seed_chunk_layout(const Profile& profile, int64_t chunk_size);

// cgdp, docs/equations.md §7: backward time T with `chunks` (ascending, covering
// every layer) on `workers` devices: each chunk's backward, then t_as if it has
// gradients, its copies passing the in-order resources of cgdp_chunk_stage_s;
// T = max(backward with syncs, last copy back). Layer ranges are not checked.
double cgdp_backward_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                       const std::vector<LayerRange>& chunks);

// cgdp: seconds one chunk of `bytes` gradients holds each resource, in order:
// D2H copy, host accumulation of the first machine's devices, the hosts' ring
// AllReduce (only with more than one machine), H2D copy.
std::vector<double> cgdp_chunk_stage_s(double bytes, const Cluster& cluster, const std::vector<int64_t>& per_machine);

// parallax: bytes of one iteration's variables by kind (seed 004 §5.3.1, Table 3).
struct VariableBytes {
  double dense = 0;           // w of the dense layers: every element every iteration
  double sparse = 0;          // w of the sparse layers: whole tables
  double sparse_touched = 0;  // Σ sparsity·w over sparse layers: the αw one worker touches
};
VariableBytes variable_bytes(const Profile& profile);

// parallax: rows d workers touch together, Σ w·U_d over the sparse layers,
// U_d = touched_fraction (the profile's measured union of d batches, else
// rows drawn independently, 1 - (1 - α)^d, as model/layer.hpp's
// sparse_fraction assumes). Local aggregation sends this union, not d copies.
double sparse_union_bytes(const Profile& profile, int64_t d);

// parallax: the layers each parameter server holds: one per sparse layer (its
// table), and with `serves_dense` (ps mode) one for the dense layers after
// the last sparse one.
std::vector<LayerRange> parallax_served_layers(const Profile& profile, bool serves_dense);

// parallax: the step of the served variables of `layers` each round on one
// machine's host, for its 1/m share (seed 004 §3, §5.1; docs/equations.md §3):
// summing the N workers' pushes of G = Σ αw bytes, the optimizer on the rows
// they touched (a sparse layer's step of one worker's αw rows, as profiled,
// scaled to the union U(N) = w(1 − (1 − α)^N)), and the N replies:
// (2·N·G / host.reduce_bytes_per_s + optimizer) / m.
double parallax_server_step_s(const Profile& profile, const Cluster& cluster, int64_t workers, LayerRange layers);

// parallax: one worker's update per mode: its dense layers' steps unless the
// servers hold them (ps); a sparse table's rows are stepped by the servers
// (hybrid, ps) or, gathered from all N workers around the ring (ar), by every
// worker: N times one worker's rows. One worker steps everything itself.
double parallax_worker_update_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                                const std::string& mode);

}  // namespace trainsim
