// `single` plan: one device runs each iteration's forward layer group by
// layer group, the backward in reverse, then the optimizer update, back to
// back (predict_single). Parameter-free layers join the next layer's op, and
// an op ends only where one tensor passes to the next (not inside a residual
// block), so a deep network's trace stays readable and its plan small.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// How many tensors cross the cut after each layer: the outputs of layers at
// or before it (and the model's input) that a later layer still reads.
std::vector<int64_t> tensors_across_cuts(const Profile& profile) {
  const auto n = static_cast<int64_t>(profile.layers.size());
  std::unordered_map<std::string, int64_t> index{{"input", -1}};
  for (int64_t l = 0; l < n; ++l) index[profile.layers[static_cast<size_t>(l)].name] = l;
  std::vector<int64_t> last_reader(static_cast<size_t>(n + 1), -1);  // by tensor + 1 (0: the input)
  for (int64_t l = 0; l < n; ++l) {
    for (const std::string& input : profile.layers[static_cast<size_t>(l)].inputs) {
      auto it = index.find(input);
      if (it != index.end()) last_reader[static_cast<size_t>(it->second + 1)] = l;
    }
  }
  // Tensor t (made by layer t, the input by "layer −1") crosses cuts t .. last reader − 1.
  std::vector<int64_t> change(static_cast<size_t>(n + 1), 0);
  for (int64_t t = -1; t < n; ++t) {
    const int64_t reader = last_reader[static_cast<size_t>(t + 1)];
    if (reader <= t) continue;
    ++change[static_cast<size_t>(std::max<int64_t>(t, 0))];
    --change[static_cast<size_t>(reader)];
  }
  std::vector<int64_t> across(static_cast<size_t>(n));
  int64_t live = 0;
  for (int64_t l = 0; l < n; ++l) across[static_cast<size_t>(l)] = live += change[static_cast<size_t>(l)];
  return across;
}

// Ranges that each hold a layer with parameters and end at the first cut
// after it that one tensor passes (in a chain, right after that layer; in a
// residual network, at the end of its block: an op that ended inside one
// would hand over the branch and the shortcut packed together, a copy of
// both); trailing parameter-free layers form the last range.
std::vector<LayerRange> groups_closed_by_parameters(const Profile& profile) {
  const std::vector<int64_t> across = tensors_across_cuts(profile);
  std::vector<int64_t> firsts;
  bool has_parameters = false;
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    has_parameters |= profile.layers[i].param_bytes > 0;
    if (has_parameters && across[i] <= 1) {
      firsts.push_back(static_cast<int64_t>(i) + 1);
      has_parameters = false;
    }
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
