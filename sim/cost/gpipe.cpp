// `gpipe` (GPipe, Huang et al. 2019; seed 001's baseline): the mini-batch is
// split into M micro-batches that flow forward through the stages, then
// backward, then a flush: every stage updates once, so no gradient is stale.
#include <algorithm>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {
namespace {

// One sweep (forward or backward) of M identical micro-batches through the
// stages and the links between them, a flow shop: the first micro-batch
// crosses every stage and link (latency included), the other M-1 follow at
// the pace of the slowest stage or link bandwidth (docs/equations.md §5's (M+K-1)·max_k t_k when all stages are equal).
// Micro-batch times are the stage times / M (linear in the batch) plus, with
// a measured profile, the layers' fixed parts (scaled_s); the r replicas of a
// stage share its micro-batches, 1/r of those times each. A stage that passes
// each micro-batch on (forward: all but the last; backward: all but the
// first) also loses the hand-off after it (DeviceSpec::handoff_s), which
// paces the sweep but does not delay the micro-batch it sends.
double sweep_s(const Pipeline& pipe, int64_t microbatches, bool forward, bool with_transfers, double handoff_s) {
  const double m = static_cast<double>(microbatches);
  const int64_t stages = pipe.stage_count();
  double slowest_s = 0, path_s = 0;
  for (int64_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    const double micro_s = forward ? scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / m)
                                   : scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / m);
    const double r = static_cast<double>(s.replicas);
    const bool sends = forward ? k + 1 < stages : k > 0;
    slowest_s = std::max(slowest_s, (micro_s + (sends ? handoff_s : 0.0)) / r);
    path_s += micro_s / r;
  }
  if (with_transfers) {
    for (const StageBoundary& b : pipe.boundaries) {
      // A hop paces the sweep by its bytes only: its latency is in flight (LogP's L), so it
      // delays the first micro-batch, not the others behind it.
      slowest_s = std::max(slowest_s, b.bytes / m / b.link.bandwidth_bytes_per_s);
      path_s += transfer_s(b.bytes / m, b.link);
    }
  }
  return path_s + (m - 1) * slowest_s;
}

}  // namespace

// Iteration = forward sweep + backward sweep + the update after the flush,
// stages in parallel: max_k (W^r_k + U_k), replicas summing their gradients
// (docs/equations.md §4's W^m) before updating.
Prediction predict_gpipe(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "gpipe";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kGpipePartition);
  const int64_t m = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, p.notes);

  double flush_s = 0;
  for (const PipelineStage& s : pipe.stages) flush_s = std::max(flush_s, s.weight_sync_s + s.update_s);
  // The barrier after the flush: t_sync (docs/equations.md §2).
  const double barrier = barrier_s(pipe.devices, cluster.collective.sync_s);
  const double h = cluster.device.handoff_s;
  p.iteration_s = sweep_s(pipe, m, true, true, h) + sweep_s(pipe, m, false, true, h) + flush_s + barrier;
  const double compute_only_s = sweep_s(pipe, m, true, false, 0) + sweep_s(pipe, m, false, false, 0) + flush_s;

  // Activations of all the micro-batches a replica ran: its share of the mini-batch.
  finish_flushed_pipeline(
      p, profile, pipe, m, barrier, compute_only_s,
      [&pipe](int64_t k) { return 1.0 / static_cast<double>(pipe.stages[static_cast<size_t>(k)].replicas); }, config);
  return p;
}

}  // namespace trainsim
