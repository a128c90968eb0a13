// `single`: one device runs forward, backward and the optimizer update
// back to back; the baseline of every speedup.
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"

namespace trainsim {

// t = Σ forward_s + Σ backward_s + update (docs/equations.md §1, one worker, no communication).
Prediction predict_single(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const ModelTotals t = model_totals(profile);
  Prediction p;
  p.strategy = "single";
  p.workers = 1;
  p.iteration_s = t.forward_s + t.backward_s + model_update_s(profile, cluster);
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.breakdown.compute_s = p.iteration_s;
  p.memory = {replica_memory(profile, 0, static_cast<int64_t>(profile.layers.size()) - 1, 1.0)};
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
