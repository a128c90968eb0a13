// `gpipe` plan (GPipe, Huang et al. 2019; seed 001's baseline): every
// mini-batch is split into M micro-batches that run forward through all
// stages, then backward in reverse order, then a flush: each stage's replicas
// AllReduce their gradients, every stage updates once, and a barrier of all
// workers closes the mini-batch. No gradient is stale: every op of mini-batch
// i reads weight version i.
#include <vector>

#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {

// The iteration the cost model times (docs/equations.md §5): a forward sweep, a
// backward sweep (each a flow shop of M micro-batches through the stages and
// links), then max_k (W^r_k + U_k). The barrier after the updates makes the
// next mini-batch start only once every stage has updated, as that sum
// assumes. Activations of all micro-batches stay until their backward.
Plan plan_gpipe(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kGpipePartition);
  const int64_t microbatches = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, notes);
  PipelinePlanWriter w("gpipe", profile, pipe, iterations, microbatches);  // checks the plan's size first
  const auto m = static_cast<int32_t>(microbatches);
  const int32_t stages = w.stage_count();
  for (int32_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[k];
    const double held = static_bytes(replica_memory(profile, s.layers.first, s.layers.last, 0));
    for (int32_t j = 0; j < w.replicas(k); ++j) w.worker(w.replica_worker(k, j)).static_bytes = held;
  }
  for (int32_t i = 0; i < iterations; ++i) {
    for (int32_t k = 0; k < stages; ++k) {
      for (int32_t mb = 0; mb < m; ++mb) w.forward(k, i, mb, i);
    }
    for (int32_t k = stages - 1; k >= 0; --k) {
      for (int32_t mb = m - 1; mb >= 0; --mb) w.backward(k, i, mb, i);
    }
    for (int32_t k = 0; k < stages; ++k) {
      for (int32_t j = 0; j < w.replicas(k); ++j) w.synchronised_update(w.replica_worker(k, j), i, i);
    }
    for (int32_t worker = 0; worker < static_cast<int32_t>(pipe.devices); ++worker) w.barrier(worker, i);
  }
  return std::move(w).build();
}

}  // namespace trainsim
