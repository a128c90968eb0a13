// `pipedream` plan: 1F1B with weight stashing (PipeDream, SOSP 2019; seed
// 000's baseline). Each worker admits its NOAM share of mini-batches, then
// alternates one backward and one forward; every backward is followed by the
// stage's update (after the replicas' AllReduce when the stage is
// replicated); a backward reads the weight version its forward read.
#include <vector>

#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {
namespace {

// The ops of replica `replica` of `stage` in 1F1B order. Versions count the
// updates the stage has applied: one per round of its replicas (each
// replica's backward of the round, then their AllReduce, then the update),
// so the replicas' weights stay equal. A replica without a mini-batch in the
// last round still joins its AllReduce and update.
void write_worker(PipelinePlanWriter& w, int32_t stage, int32_t replica) {
  const int32_t worker = w.replica_worker(stage, replica);
  const int32_t replicas = w.replicas(stage);
  std::vector<int32_t> stashed(static_cast<size_t>(w.iterations()), -1);  // version each forward read
  int32_t version = 0;
  auto finish_round = [&](int32_t iteration) { w.synchronised_update(worker, iteration, version++); };
  for (const PipelineTask& task : one_f_one_b_program(w.pipeline(), stage, replica, w.iterations())) {
    if (task.forward) {
      w.forward(stage, task.iteration, 0, version);
      stashed[task.iteration] = version;
    } else {
      w.op(w.backward(stage, task.iteration, 0, stashed[task.iteration])).weights = WeightPolicy::kStashed;
      finish_round(task.iteration);
    }
  }
  while (version < static_cast<int32_t>(replica_rounds(w.iterations(), replicas).size()))
    finish_round(w.iterations() - 1);
}

}  // namespace

Plan plan_pipedream(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kPipedreamPartition);
  PipelinePlanWriter w("pipedream", profile, pipe, iterations);
  // Weights, gradients, momentum and the n_k − 1 stashed versions
  // (docs/equations.md §4), as the cost model counts them.
  const std::vector<DeviceMemory> memory = weight_stashing_memory(profile, pipe);
  for (int32_t k = 0; k < w.stage_count(); ++k) {
    for (int32_t j = 0; j < w.replicas(k); ++j) {
      const int32_t worker = w.replica_worker(k, j);
      w.worker(worker).static_bytes = static_bytes(memory[worker]);
      write_worker(w, k, j);
    }
  }
  return std::move(w).build();
}

}  // namespace trainsim
