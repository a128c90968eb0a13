// `dualpipe` plan (seed 000 §3, Algorithm 1): in every time unit each stage
// runs one forward and one backward of different mini-batches, forward first;
// all workers synchronise, the stages that ran a backward apply its gradient,
// and all synchronise again. Mini-batch i runs forward on stage k in unit
// i + k and backward in unit i + 2S − 2 − k (Figure 6b): the last stage runs
// both in one unit, stage 0 completes the round trip 2S − 2 units after.
#include <cstdint>
#include <vector>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {
namespace {

// Memory as the cost model counts it: SpecTrain keeps the smoothed gradient
// and two predicted weight copies (Algorithm 1 lines 1, 18, 26).
void set_static_bytes(PipelinePlanWriter& w, const Profile& profile, bool spectrain) {
  for (int32_t k = 0; k < w.stage_count(); ++k) {
    const PipelineStage& s = w.pipeline().stages[k];
    DeviceMemory m = replica_memory(profile, s.layers.first, s.layers.last, 0);
    if (spectrain) m.stashed_bytes = 3.0 * s.param_bytes;
    for (int32_t j = 0; j < w.replicas(k); ++j) w.worker(w.replica_worker(k, j)).static_bytes = static_bytes(m);
  }
}

struct UnitState {
  std::vector<int32_t> version;            // per stage: updates applied
  std::vector<int32_t> last_iteration;     // per worker: mini-batch of its latest task
  std::vector<std::vector<int32_t>> left;  // [stage][round]: backwards still to run before the round's update
};

// A task reading the weights predicted `ahead` versions past the stage's
// current ones (none: the current ones).
Op& predict(Op& op, int32_t ahead) {
  if (ahead > 0) {
    TRAINSIM_CHECK(ahead <= INT16_MAX, "dualpipe: a prediction too many versions ahead");
    op.weights = WeightPolicy::kPredicted;
    op.weight_ahead = static_cast<int16_t>(ahead);
  }
  return op;
}

// Phase 1 of unit u (lines 8-10): F(u − k) then B(u − 2S + 2 + k) on stage k,
// each on the replica taking that mini-batch. SpecTrain: each reads the
// weights predicted s versions ahead of the stage's current ones, s = 2S − k − 2
// for the forward and s = k for the backward (eqs. 5-6); vanilla: the current.
// Returns the stages whose round of backwards completed.
// The predictions add their passes (spectrain_work) to the tasks.
std::vector<int32_t> run_tasks(PipelinePlanWriter& w, UnitState& st, int32_t unit, bool spectrain) {
  const int32_t stages = w.stage_count();
  std::vector<int32_t> rounds_done;
  for (int32_t k = 0; k < stages; ++k) {
    const SpecTrainWork work = spectrain ? spectrain_work(w.pipeline(), k) : SpecTrainWork{};
    const int32_t f = unit - k;
    const int32_t b = unit - (2 * stages - 2 - k);
    if (f >= 0 && f < w.iterations()) {
      const int32_t ahead = spectrain ? 2 * stages - k - 2 : 0;
      predict(w.op(w.forward(k, f, 0, st.version[k] + ahead)), ahead).work_s += work.forward_s;
      st.last_iteration[w.worker_of(k, f, 0)] = f;
    }
    if (b >= 0 && b < w.iterations()) {
      const int32_t ahead = spectrain ? k : 0;
      predict(w.op(w.backward(k, b, 0, st.version[k] + ahead)), ahead).work_s += work.backward_s;
      st.last_iteration[w.worker_of(k, b, 0)] = b;
      if (--st.left[k][b / w.replicas(k)] == 0) rounds_done.push_back(k);
    }
  }
  return rounds_done;
}

}  // namespace

// Lines 10-13 after the tasks: a barrier that also waits for the unit's
// transfers, the update phase (a replicated stage's replicas first AllReduce
// the round's gradients, once each of them has run its backward of the round),
// and a second barrier. SpecTrain's update also smooths v.
Plan plan_dualpipe(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kDualpipePartition);
  const bool spectrain = config.get_bool("spectrain", true);
  PipelinePlanWriter w("dualpipe", profile, pipe, iterations);
  set_static_bytes(w, profile, spectrain);
  const int32_t stages = w.stage_count();
  const auto workers = static_cast<int32_t>(pipe.devices);
  UnitState st;
  st.version.assign(static_cast<size_t>(stages), 0);
  st.last_iteration.assign(static_cast<size_t>(workers), 0);
  for (int32_t k = 0; k < stages; ++k) st.left.push_back(replica_rounds(iterations, w.replicas(k)));
  for (int32_t unit = 0; unit < iterations + 2 * stages - 2; ++unit) {
    const std::vector<int32_t> rounds_done = run_tasks(w, st, unit, spectrain);
    for (int32_t worker = 0; worker < workers; ++worker) {
      w.barrier(worker, st.last_iteration[worker], w.take_sends(worker));
    }
    for (int32_t k : rounds_done) {
      for (int32_t j = 0; j < w.replicas(k); ++j) {
        const int32_t worker = w.replica_worker(k, j);
        const OpId update = w.synchronised_update(worker, st.last_iteration[worker], st.version[k]);
        if (spectrain) w.op(update).work_s += spectrain_work(pipe, k).update_s;  // v's smoothing
      }
      ++st.version[k];
    }
    for (int32_t worker = 0; worker < workers; ++worker) w.barrier(worker, st.last_iteration[worker]);
  }
  return std::move(w).build();
}

}  // namespace trainsim
