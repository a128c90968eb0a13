// `dualpipe` (seed 000 §3): every pipeline time unit each stage issues one
// forward and one backward together, then all stages synchronise, apply the
// buffered gradients and synchronise again (Algorithm 1). `spectrain` runs
// the forward and backward on predicted weights (§3.3, docs/equations.md §6).
#include <algorithm>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {
namespace {

// Phase 1 of a unit on stage k (Algorithm 1 lines 8-10): forward and backward
// issued back to back (Figure 6b draws the forward first); the forward's
// output leaves at once and overlaps the backward, the backward's output
// leaves when it ends, and the barrier waits for both to land. A replicated
// stage's replicas take mini-batches in turn: 1/r of each task per mini-batch.
double tasks_phase_s(const Pipeline& pipe, int64_t k, bool with_transfers) {
  const PipelineStage& s = pipe.stages[k];
  const double r = static_cast<double>(s.replicas);
  const double forward_s = s.forward_s / r;
  const double both_s = forward_s + s.backward_s / r;
  double phase_s = both_s;
  if (with_transfers && k + 1 < pipe.stage_count()) {
    phase_s = std::max(phase_s, forward_s + transfer_s(s.output_bytes, pipe.boundaries[k].link));
  }
  if (with_transfers && k > 0) {
    phase_s = std::max(phase_s, both_s + transfer_s(s.input_bytes, pipe.boundaries[k - 1].link));
  }
  return phase_s;
}

// Phase 2 (lines 11-13): the update, with whatever of W^r the compute cannot hide.
double update_phase_s(const PipelineStage& s) {
  const double exposed_sync_s = std::max(0.0, s.weight_sync_s - s.compute_s());
  return (s.update_s + exposed_sync_s) / static_cast<double>(s.replicas);
}

}  // namespace

// docs/equations.md §5: one mini-batch per unit of max_k(F_k + B_k), plus the
// transfers the barrier waits for and the update phase max_k U_k.
Prediction predict_dualpipe(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "dualpipe";
  Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kDualpipePartition);
  const bool spectrain = config.get_bool("spectrain", true);
  const int64_t stages = pipe.stage_count();
  // SpecTrain's predictions lengthen the tasks they precede and the smoothing
  // of v the update (seed 000 eqs. 1, 4).
  if (spectrain) {
    for (int64_t k = 0; k < stages; ++k) {
      const SpecTrainWork work = spectrain_work(pipe, k);
      PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
      s.forward_s += work.forward_s;
      s.backward_s += work.backward_s;
      s.update_s += work.update_s;
    }
  }

  double tasks_s = 0, compute_tasks_s = 0, update_s = 0;
  for (int64_t k = 0; k < stages; ++k) {
    tasks_s = std::max(tasks_s, tasks_phase_s(pipe, k, true));
    compute_tasks_s = std::max(compute_tasks_s, tasks_phase_s(pipe, k, false));
    update_s = std::max(update_s, update_phase_s(pipe.stages[k]));
  }
  // Two barriers per unit (Algorithm 1 lines 10 and 13), t_sync each (docs/equations.md §2).
  const double barriers_s = 2.0 * barrier_s(pipe.devices, cluster.collective.sync_s);
  p.iteration_s = tasks_s + update_s + barriers_s;

  std::vector<Breakdown> per_stage;
  std::vector<DeviceMemory> memory;
  for (int64_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[k];
    const double r = static_cast<double>(s.replicas);
    const double exposed_sync_s = std::max(0.0, s.weight_sync_s - s.compute_s()) / r;
    per_stage.push_back(
        device_breakdown(p.iteration_s, s.compute_s() / r, exposed_sync_s + barriers_s, tasks_s - compute_tasks_s));
    // A mini-batch returns to stage k 2(S-1-k) units after its forward there
    // (s = 2S-k-2 minus s = k, docs/equations.md §6), one entering per unit.
    const double in_flight = static_cast<double>((2 * (stages - 1 - k) + 1 + s.replicas - 1) / s.replicas);
    DeviceMemory m = stage_memory(profile, s, in_flight);
    // SpecTrain keeps the smoothed gradient v (eq. 1, Algorithm 1 line 1) and
    // the predicted weights of the concurrent forward and backward (lines 18, 26).
    if (spectrain) m.stashed_bytes = 3.0 * s.param_bytes;
    memory.push_back(m);
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = per_device_memory(pipe, memory);
  // The forward on stage k runs 2(S-1-k) versions before its mini-batch
  // completes (docs/equations.md §6, s = 2N-k-2 minus k): 2S-2 on stage 0.
  p.staleness = largest_weighted_lag(pipe, [&](int64_t k) { return 2 * (stages - 1 - k); });
  if (spectrain) {
    p.notes.push_back(
        "spectrain: each task runs on weights predicted s versions ahead, W_t - s·lr·v_(t-1) with v "
        "the smoothed gradient; s = 2S-k-2 for the forward and s = k for the backward on stage k, so "
        "both see the version their mini-batch completes with; staleness is the largest gap bridged (" +
        std::to_string(p.staleness) + "); each prediction and each smoothing of v costs 3/5 of the stage's "
        "update (3 passes over its weights of the update's 5)");
  } else {
    p.notes.push_back("spectrain off (vanilla DualPipe): forward and backward use the current weights, up to " +
                      std::to_string(p.staleness) + " versions stale and not the same version for both");
  }
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
