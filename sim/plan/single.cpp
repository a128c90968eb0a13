// `single` plan: one device runs each iteration's forward layer group by
// layer group, the backward in reverse, then the optimizer update, back to
// back (predict_single). Parameter-free layers join the next layer's op, so a
// deep network's trace stays readable and its plan small.
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// Ranges that each end at a layer with parameters; trailing parameter-free
// layers form the last range.
std::vector<LayerRange> groups_closed_by_parameters(const Profile& profile) {
  std::vector<int64_t> firsts;
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    if (profile.layers[i].param_bytes > 0) firsts.push_back(static_cast<int64_t>(i) + 1);
  }
  return split_layers_at(profile, std::move(firsts));
}

}  // namespace

// t = Σ forward_s + Σ backward_s + update (docs/equations.md §1, one worker, no
// communication): every op waits only for the one before it on the stream.
Plan plan_single(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_single, profile, cluster, config, iterations);
  const std::vector<LayerRange> groups = groups_closed_by_parameters(profile);
  const double update_s = model_update_s(profile, cluster);
  ReplicaCompute compute(profile);
  for (int32_t i = 0; i < iterations; ++i) {
    for (const LayerRange& g : groups) b.add(compute.op(OpKind::kForward, g, 0, i, i));
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) b.add(compute.op(OpKind::kBackward, *g, 0, i, i));
    b.add(update_op(update_s, all_layers(profile), 0, i, i));
  }
  return std::move(b).build();
}

}  // namespace trainsim
