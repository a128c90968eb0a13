// `pipedream-sync`: PipeDream's 1F1B as seed 000 ran it (§3.1, Figure 6a):
// a global barrier after every pipeline time unit, each stage issuing either
// one forward or one backward per unit, weights stashed as in `pipedream`.
#include <algorithm>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {
namespace {

// The two kinds of time unit of the 1F1B steady state. Neighbouring stages
// are out of phase: the last stage runs F(n) then B(n), so stage k runs
// forwards in the units where the stages S-1, S-3, ... run backwards.
struct UnitPair {
  double first_s = 0;   // stages with S-1-k even run a forward, the others a backward
  double second_s = 0;  // the opposite
};

// Task times of one stage for one mini-batch. A replicated stage's replicas
// take mini-batches in turn, so per mini-batch it costs 1/r of each task
// (docs/equations.md §4); the backward carries the update and the part of W^r its
// compute cannot hide. A task's outgoing transfer must land before the
// barrier, since the neighbour consumes it in the next unit.
struct StageTasks {
  double forward_s = 0;
  double backward_s = 0;
};

StageTasks stage_tasks(const Pipeline& pipe, int64_t k, bool with_transfers) {
  const PipelineStage& s = pipe.stages[k];
  const double r = static_cast<double>(s.replicas);
  const double exposed_sync_s = std::max(0.0, s.weight_sync_s - s.compute_s());
  StageTasks t{s.forward_s / r, (s.backward_s + s.update_s + exposed_sync_s) / r};
  if (with_transfers && k + 1 < pipe.stage_count()) t.forward_s += transfer_s(s.output_bytes, pipe.boundaries[k].link);
  if (with_transfers && k > 0) t.backward_s += transfer_s(s.input_bytes, pipe.boundaries[k - 1].link);
  return t;
}

// Each unit lasts the slowest task issued in it (seed 000 §3.1).
UnitPair unit_times(const Pipeline& pipe, bool with_transfers) {
  UnitPair u;
  const int64_t stages = pipe.stage_count();
  for (int64_t k = 0; k < stages; ++k) {
    const StageTasks t = stage_tasks(pipe, k, with_transfers);
    const bool forward_first = (stages - 1 - k) % 2 == 0;
    u.first_s = std::max(u.first_s, forward_first ? t.forward_s : t.backward_s);
    u.second_s = std::max(u.second_s, forward_first ? t.backward_s : t.forward_s);
  }
  return u;
}

}  // namespace

// docs/equations.md §5: a mini-batch costs two units. Each unit lasts the slowest
// task issued in it; docs/equations.md's 2·max_k max(F_k, B_k) is this sum's upper
// bound, reached when the slowest forward and backward sit on stages of the
// same phase (always, with equal stages).
Prediction predict_pipedream_sync(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "pipedream-sync";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kPipedreamSyncPartition);
  const UnitPair units = unit_times(pipe, true);
  const UnitPair compute_units = unit_times(pipe, false);
  // A barrier ends each of the two units, t_sync each (docs/equations.md §2).
  const double barriers_s = 2.0 * barrier_s(pipe.devices, cluster.collective.sync_s);
  p.iteration_s = units.first_s + units.second_s + barriers_s;
  // What the transfers add to the units is every device's wait for a peer.
  const double transfer_wait_s = units.first_s + units.second_s - (compute_units.first_s + compute_units.second_s);

  std::vector<Breakdown> per_stage;
  for (const PipelineStage& s : pipe.stages) {
    const double r = static_cast<double>(s.replicas);
    const double exposed_sync_s = std::max(0.0, s.weight_sync_s - s.compute_s()) / r;
    per_stage.push_back(device_breakdown(p.iteration_s, s.compute_s() / r, exposed_sync_s + barriers_s, transfer_wait_s));
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = weight_stashing_memory(profile, pipe);
  // As `pipedream`: stashed versions, S - 1 - k at stage k.
  p.staleness = largest_weighted_lag(pipe, [&](int64_t k) { return one_f_one_b_in_flight(pipe, k) - 1; });
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
