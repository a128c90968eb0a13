// `dp-ring` plan: every worker runs forward and backward of its own batch,
// then all workers AllReduce every gradient at once (algorithm from the
// `algorithm` setting, ring by default), then each updates. Nothing overlaps
// the collective, so the simulated iteration equals predict_dp_ring's.
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// docs/equations.md §1 eq. (2) with §2's AllReduce: per worker forward, backward,
// AllReduce(M) (+ t_sync, which the simulator adds per collective), update;
// one worker communicates nothing.
Plan plan_dp_ring(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_dp_ring, profile, cluster, config, iterations);
  const int64_t workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const LayerRange layers = all_layers(profile);
  const double param_bytes = model_totals(profile).param_bytes;
  const int32_t group = workers > 1 ? b.group(all_workers(workers)) : -1;
  const double update_s = exchanged_update_s(profile, cluster, workers);
  ReplicaCompute compute(profile);
  for (int32_t i = 0; i < iterations; ++i) {
    for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) {
      b.add(compute.op(OpKind::kForward, layers, w, i, i));
      const OpId backward = b.add(compute.op(OpKind::kBackward, layers, w, i, i));
      Op update = update_op(update_s, layers, w, i, i);
      if (workers > 1) {
        update.deps = {b.add(transfer_op(OpKind::kAllReduce, w, i, param_bytes, layers, {backward}, group, algorithm))};
      }
      b.add(std::move(update));
    }
  }
  return std::move(b).build();
}

}  // namespace trainsim
