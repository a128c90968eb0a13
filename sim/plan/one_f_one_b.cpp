// `1f1b` plan (PipeDream-Flush; Megatron-LM's schedule): on stage k of K,
// each mini-batch's M micro-batches run as min(K − k − 1, M) forwards of
// warm-up, then one forward and one backward in turn, then the remaining
// backwards; then the flush of `gpipe`: each stage's replicas AllReduce
// their gradients, every stage updates once, and a barrier of all workers
// closes the mini-batch. Every op of mini-batch i reads weight version i.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {

// The iteration the cost model times (docs/equations.md §5); a stage's
// replicas take micro-batch mb in turn (mb mod r), each in the stage's order.
Plan plan_1f1b(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kGpipePartition);
  const int64_t microbatches = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, notes);
  PipelinePlanWriter w("1f1b", profile, pipe, iterations, microbatches);  // checks the plan's size first
  const auto m = static_cast<int32_t>(microbatches);
  const int32_t stages = w.stage_count();
  for (int32_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[k];
    // Weights, gradients and optimizer state; the ops allocate the activations of what is in flight.
    const double held = static_bytes(replica_memory(profile, s.layers.first, s.layers.last, 0));
    for (int32_t j = 0; j < w.replicas(k); ++j) w.worker(w.replica_worker(k, j)).static_bytes = held;
  }
  for (int32_t i = 0; i < iterations; ++i) {
    for (int32_t k = 0; k < stages; ++k) {
      const int32_t warmup = std::min(stages - k - 1, m);
      for (int32_t mb = 0; mb < warmup; ++mb) w.forward(k, i, mb, i);
      for (int32_t mb = 0; mb < m - warmup; ++mb) {
        w.forward(k, i, mb + warmup, i);
        w.backward(k, i, mb, i);
      }
      for (int32_t mb = m - warmup; mb < m; ++mb) w.backward(k, i, mb, i);
    }
    for (int32_t k = 0; k < stages; ++k) {
      for (int32_t j = 0; j < w.replicas(k); ++j) w.synchronised_update(w.replica_worker(k, j), i, i);
    }
    for (int32_t worker = 0; worker < static_cast<int32_t>(pipe.devices); ++worker) w.barrier(worker, i);
  }
  return std::move(w).build();
}

}  // namespace trainsim
