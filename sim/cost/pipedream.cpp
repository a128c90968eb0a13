// `pipedream`: pipelined model parallelism, 1F1B scheduling with weight
// stashing and optional stage replication (PipeDream, Narayanan et al. SOSP
// 2019; seed 000's baseline). Boundary transfers run on their own streams and
// overlap compute; a replicated stage overlaps its weight synchronisation.
#include <algorithm>

#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {

// Steady state, docs/equations.md §4-5 (PipeDream's A(N, M) for a given partition):
// one mini-batch per max(max_k T(stage k, r_k), max_b 2·a_b/B), with
// T = (1/r)·max(F + B + U, W^r) the replicated stage time, update included.
Prediction predict_pipedream(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "pipedream";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kPipedreamPartition);

  double slowest_stage_s = 0;
  for (const PipelineStage& s : pipe.stages) {
    slowest_stage_s = std::max(slowest_stage_s, replicated_stage_s(s.compute_s(), s.replicas, s.weight_sync_s));
  }
  double slowest_link_s = 0;
  for (const StageBoundary& b : pipe.boundaries) slowest_link_s = std::max(slowest_link_s, b.comm_s);
  p.iteration_s = std::max(slowest_stage_s, slowest_link_s);

  // Per device of stage k: its share (1/r) of the stage's compute, the part of
  // W^r that compute cannot hide, the wait when a link is the bottleneck, and
  // the rest of the slowest stage's time as imbalance.
  std::vector<Breakdown> per_stage;
  for (const PipelineStage& s : pipe.stages) {
    const double r = static_cast<double>(s.replicas);
    const double exposed_sync_s = std::max(0.0, s.weight_sync_s - s.compute_s()) / r;
    per_stage.push_back(
        device_breakdown(p.iteration_s, s.compute_s() / r, exposed_sync_s, p.iteration_s - slowest_stage_s));
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = weight_stashing_memory(profile, pipe);
  // Weight stashing keeps each mini-batch's forward and backward on one
  // version; the input stage's version lags the newest by NOAM - 1 updates
  // (S - 1 without replication; stage k lags S - 1 - k).
  p.staleness = largest_weighted_lag(pipe, [&](int64_t k) { return one_f_one_b_in_flight(pipe, k) - 1; });
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
