// `zb-h1` plan (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", §3.1's
// handcrafted ZB-H1): each stage's tasks in zb_h1_order (sim/cost/
// zero_bubble.hpp), B and W as backwards of part of the gradients, then
// `1f1b`'s flush. Holding back the later stages' Ws sends the input
// gradients up the pipeline at B a stage instead of B + W.
#include <algorithm>
#include <vector>

#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/cost/zero_bubble.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {

Plan plan_zb_h1(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kGpipePartition, /*read_replicas=*/false);
  const int64_t microbatches = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, notes);
  const double share = resolve_weight_share(config);
  PipelinePlanWriter w("zb-h1", profile, pipe, iterations, microbatches);  // checks the plan's size first
  const auto m = static_cast<int32_t>(microbatches);
  const int32_t stages = w.stage_count();
  for (int32_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[k];
    w.worker(w.replica_worker(k, 0)).static_bytes =
        static_bytes(replica_memory(profile, s.layers.first, s.layers.last, 0));
  }
  for (int32_t i = 0; i < iterations; ++i) {
    for (int32_t k = 0; k < stages; ++k) {
      for (const ZeroBubbleTask& t : zb_h1_order(stages, k, m)) {
        if (t.kind == ZeroBubbleTask::kForward) w.forward(k, i, t.microbatch, i);
        if (t.kind == ZeroBubbleTask::kInput) w.backward(k, i, t.microbatch, i, share);
        if (t.kind == ZeroBubbleTask::kWeights) w.weight_gradients(k, i, t.microbatch, i, share);
      }
    }
    for (int32_t k = 0; k < stages; ++k) w.synchronised_update(w.replica_worker(k, 0), i, i);
    for (int32_t worker = 0; worker < static_cast<int32_t>(pipe.devices); ++worker) w.barrier(worker, i);
  }
  return std::move(w).build();
}

}  // namespace trainsim
