// Pipeline stages, shared by the pipeline cost models (pipedream,
// pipedream-sync, dualpipe, gpipe, dsp), their plan generators and the
// partition search: placing stages on devices, the per-stage sums and
// boundary traffic every schedule runs on, and the memory of a stage. Choosing
// the partition from the settings is pipeline_settings.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// One stage: a contiguous range of layers run by `replicas` devices, each
// replica taking whole mini-batches in turn (PipeDream's replicated stage).
// Times and bytes are per mini-batch (profile.batch_size samples) on one device.
struct PipelineStage {
  LayerRange layers;
  int64_t replicas = 1;
  int64_t first_device = 0;     // replica i runs on device first_device + i (0-based in the cluster)
  double forward_s = 0;         // F_k: Σ forward_s of the stage's layers
  double backward_s = 0;        // B_k: Σ backward_s
  double forward_fixed_s = 0;   // their batch-independent parts (measured profiles)
  double backward_fixed_s = 0;
  double update_s = 0;          // U_k: optimizer update of the stage's weights (common.hpp)
  double param_bytes = 0;       // w_k: Σ param_bytes
  double activation_bytes = 0;  // Σ activation_bytes of the stage's layers (kept for backward)
  double input_bytes = 0;       // activations received from earlier stages (boundary k-1); 0 for stage 0
  double output_bytes = 0;      // activations sent to later stages (boundary k); 0 for the last stage
  LinkSpec replica_link;        // the link among the replicas (intra_link unless they span machines)
  double weight_sync_s = 0;     // W^m of docs/equations.md §4; 0 with one replica

  // F_k + B_k + U_k: what one replica computes for one mini-batch.
  double compute_s() const { return forward_s + backward_s + update_s; }
};

// The boundary between stage k and stage k+1.
struct StageBoundary {
  double bytes = 0;   // activation bytes crossing it per mini-batch (docs/formats.md, Profile)
  LinkSpec link;      // inter_link when the two stages' devices span machines, else intra_link
  double comm_s = 0;  // 2·(bytes/B + latency): activations forward plus their gradients back
};

struct Pipeline {
  std::vector<PipelineStage> stages;
  std::vector<StageBoundary> boundaries;  // boundaries[k] lies between stages k and k+1
  int64_t devices = 0;                    // devices used: Σ replicas

  int64_t stage_count() const { return static_cast<int64_t>(stages.size()); }
};

// Exact balanced partition: contiguous, non-empty stages minimising the
// largest Σ(forward_s + backward_s) / replicas_k over stages (replicas empty =
// one per stage). Ties keep the later cut. Needs 1 <= stage_count <= layers.
std::vector<LayerRange> balanced_partition(const Profile& profile, int64_t stage_count,
                                           const std::vector<int64_t>& replicas = {});

// Bytes crossing each of the ranges.size()-1 boundaries: the activation_bytes
// of every layer in stages <= k feeding a layer in a stage > k, counted once
// per boundary it crosses (a skip edge over stage k+1 crosses two).
std::vector<double> boundary_bytes(const Profile& profile, const std::vector<LayerRange>& ranges);

// One point-to-point message: bytes / bandwidth + latency.
double transfer_s(double bytes, const LinkSpec& link);

// Per-mini-batch traffic of a boundary, docs/equations.md §4's 2·a/B (activations
// forward, their gradients back) plus one latency per message.
double boundary_comm_s(double bytes, const LinkSpec& link);

// W^m = 2(m-1)·w / B, the data-parallel weight synchronisation of a stage
// replicated m times (docs/equations.md §4, PipeDream); 0 for m = 1.
// Inline: the partition search evaluates it for every stage it tries.
inline double weight_sync_s(int64_t replicas, double param_bytes, const LinkSpec& link) {
  return 2.0 * static_cast<double>(replicas - 1) * param_bytes / link.bandwidth_bytes_per_s;
}

// T(i→j, m) = (1/m)·max(compute_s, W^m): a replicated stage's time per
// mini-batch with its weight synchronisation overlapped (docs/equations.md §4).
inline double replicated_stage_s(double compute_s, int64_t replicas, double sync_s) {
  return std::max(compute_s, sync_s) / static_cast<double>(replicas);
}

// Machine of a 0-based device index; devices fill machines in order.
int64_t machine_of(int64_t device, const Cluster& cluster);

// The link joining devices [first_device, last_device]: intra_link if they
// sit on one machine, else inter_link.
const LinkSpec& link_spanning(int64_t first_device, int64_t last_device, const Cluster& cluster);

// Places `ranges` with `replicas` (one per range) in order on the cluster and
// fills every per-stage sum and boundary. Inputs must already be valid.
Pipeline build_pipeline(const Profile& profile, const Cluster& cluster, const std::vector<LayerRange>& ranges,
                        const std::vector<int64_t>& replicas);

// SpecTrain's work on stage k of `pipe` (seed 000 eqs. 1, 4-6), per task of
// one replica: the forward predicts s = 2S − k − 2 versions ahead and the
// backward s = k, each a pass over the stage's weights when s > 0
// (spectrain_pass_s of the stage's update_s); every update smooths v, one pass.
struct SpecTrainWork {
  double forward_s = 0;
  double backward_s = 0;
  double update_s = 0;
};
SpecTrainWork spectrain_work(const Pipeline& pipe, int64_t k);

// One device's breakdown of an iteration: compute, exposed communication and
// transfer waits as given, the rest of iteration_s is idle from imbalance.
Breakdown device_breakdown(double iteration_s, double compute_s, double exposed_comm_s, double idle_transfer_s);

// Average of per-stage breakdowns (one device of each stage) over all the
// devices used, each stage weighted by its replicas.
Breakdown average_breakdown(const Pipeline& pipeline, const std::vector<Breakdown>& per_stage);

// The rest of a prediction of a pipeline flushed once a mini-batch of M
// micro-batches (gpipe, 1f1b), iteration_s set: each stage's replica
// computes its share of the micro-batches and its update, its exposed
// communication is its weight sync and the barrier, what iteration_s leaves
// beyond compute_only_s idles; stage k keeps in_flight(k) mini-batches'
// worth of activations; no staleness. Calls finish_prediction.
void finish_flushed_pipeline(Prediction& p, const Profile& profile, const Pipeline& pipe, int64_t microbatches,
                             double barrier_s, double compute_only_s, const std::function<double(int64_t)>& in_flight,
                             const StrategyConfig& config);

// Memory of one device of `stage` with momentum SGD and `batches_in_flight`
// mini-batches' activations: its own layers' and the inputs it received.
DeviceMemory stage_memory(const Profile& profile, const PipelineStage& stage, double batches_in_flight);

// Mini-batches in flight on one device of stage k under 1F1B:
// ⌈Σ_{j>=k} r_j / r_k⌉, i.e. S-k without replication and PipeDream's NOAM =
// ⌈workers / r_0⌉ at the input stage (docs/equations.md §4).
int64_t one_f_one_b_in_flight(const Pipeline& pipeline, int64_t stage);

// The staleness a pipeline's gradients have: the largest lag(k), in
// iterations, over the stages k that hold parameters (a stage without any
// has no gradient to be stale); 0 when none does.
int64_t largest_weighted_lag(const Pipeline& pipeline, const std::function<int64_t(int64_t stage)>& lag);

// Per-device memory of 1F1B with weight stashing (docs/equations.md §4, last
// line): n_k mini-batches' activations and n_k - 1 stashed weight versions,
// n_k = one_f_one_b_in_flight(pipeline, k).
std::vector<DeviceMemory> weight_stashing_memory(const Profile& profile, const Pipeline& pipeline);

// One entry per device used: each stage's memory repeated for its replicas.
std::vector<DeviceMemory> per_device_memory(const Pipeline& pipeline, const std::vector<DeviceMemory>& per_stage);

}  // namespace trainsim
