// `1f1b` (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's pipeline
// schedule): the mini-batch's M micro-batches run through the stages one
// forward, one backward at a time once each stage has admitted its warm-up,
// then a flush: every stage updates once, so no gradient is stale, and stage
// k holds at most K − k micro-batches' activations instead of GPipe's M.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {

// Iteration (docs/equations.md §5, 1F1B with a flush): the first
// micro-batch's forward through every stage and link and its backward back,
// Σ_k (f_k + b_k) + 2·Σ τ_j (τ_j a hop's bytes over its bandwidth plus its
// latency), then M − 1 periods P of the steady state, then max_k (W^r_k +
// U_k) and the barrier. Stage k admits K − k − 1 micro-batches before its
// first backward, so the round trip of micro-batch j from stage k to the
// last stage and back must fit in its K − k periods (where K − k ≤ M):
//   P = max_k max(f_k + b_k (+ its hand-offs), [Σ_{i≥k} (f_i + b_i) + 2·Σ_{k≤j<K−1} τ_j] / (K − k)),
// and no faster than a link direction carries one micro-batch's bytes. With
// K equal stages and no transfers: (M + K − 1)·(f + b), GPipe's.
Prediction predict_1f1b(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "1f1b";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kGpipePartition);
  const int64_t m = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, p.notes);
  const double mf = static_cast<double>(m);
  const double handoff = cluster.device.handoff_s;
  const int64_t stages = pipe.stage_count();
  std::vector<double> step(static_cast<size_t>(stages)), hop(static_cast<size_t>(stages), 0.0);
  double path_s = 0, pace_s = 0, compute_pace_s = 0;
  for (int64_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    const double r = static_cast<double>(s.replicas);
    step[k] =
        (scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / mf) + scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / mf)) / r;
    const double handoffs = (k + 1 < stages ? handoff : 0.0) + (k > 0 ? handoff : 0.0);
    path_s += step[k];
    pace_s = std::max(pace_s, step[k] + handoffs / r);
    compute_pace_s = std::max(compute_pace_s, step[k]);
  }
  for (size_t j = 0; j < pipe.boundaries.size(); ++j) {
    const StageBoundary& b = pipe.boundaries[j];
    hop[j] = transfer_s(b.bytes / mf, b.link);
    pace_s = std::max(pace_s, b.bytes / mf / b.link.bandwidth_bytes_per_s);
    path_s += 2 * hop[j];
  }
  // The round trips from each stage to the last and back, on the stages
  // whose warm-up leaves a forward to run after the first backward (K − k ≤ M).
  double round_trip_s = 0;
  for (int64_t k = stages - 1; k >= 0; --k) {
    round_trip_s += step[k] + (k + 1 < stages ? 2 * hop[k] : 0.0);
    if (stages - k <= m) pace_s = std::max(pace_s, round_trip_s / static_cast<double>(stages - k));
  }
  double flush_s = 0;
  for (const PipelineStage& s : pipe.stages) flush_s = std::max(flush_s, s.weight_sync_s + s.update_s);
  const double barrier = barrier_s(pipe.devices, cluster.collective.sync_s);
  p.iteration_s = path_s + (mf - 1) * pace_s + flush_s + barrier;
  double compute_path_s = 0;
  for (const double t : step) compute_path_s += t;
  const double compute_only_s = compute_path_s + (mf - 1) * compute_pace_s + flush_s;

  std::vector<Breakdown> per_stage;
  std::vector<DeviceMemory> memory;
  for (int64_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    const double r = static_cast<double>(s.replicas);
    const double compute_s = mf *
                                 (scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / mf) +
                                  scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / mf)) /
                                 r +
                             s.update_s;
    per_stage.push_back(device_breakdown(p.iteration_s, compute_s, s.weight_sync_s + barrier,
                                         p.iteration_s - compute_only_s - barrier));
    // A replica's micro-batches in flight: its warm-up, K − k, or all it runs.
    const double runs = std::ceil(mf / r);
    const double in_flight = std::min(static_cast<double>(stages - k), runs);
    memory.push_back(stage_memory(profile, s, in_flight / mf));
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = per_device_memory(pipe, memory);
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
