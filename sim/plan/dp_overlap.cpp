// `dp-overlap` plan: backward runs in pieces that each close a gradient
// bucket (group_gradients_by_bytes, last layer first); a bucket's AllReduce
// depends on the piece that completes it and runs while the rest of backward
// goes on; the send stream's order keeps one collective at a time; the update
// waits for the last bucket.
#include <map>

#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// Backward split where each gradient group closes: a piece starts at each
// group's lowest layer, so a group's gradients are complete when the piece
// starting at its `first` ends (its ready_s).
std::vector<LayerRange> pieces_closing_groups(const Profile& profile, const std::vector<GradientGroup>& groups) {
  std::vector<int64_t> firsts;
  for (const GradientGroup& g : groups) firsts.push_back(g.first);
  return split_layers_at(profile, std::move(firsts));
}

}  // namespace

// predict_dp_overlap's flow shop: bucket b's AllReduce (+ t_sync) starts at
// max(the end of the backward piece closing it, the end of bucket b-1's);
// t = Σfw + max(Σbw, end of the last AllReduce) + update.
Plan plan_dp_overlap(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_dp_overlap, profile, cluster, config, iterations);
  const int64_t workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const double bucket_bytes = resolve_bucket_bytes(profile, cluster, workers, algorithm, config);
  const std::vector<GradientGroup> buckets = group_gradients_by_bytes(profile, bucket_bytes);
  const std::vector<LayerRange> pieces = pieces_closing_groups(profile, buckets);
  std::map<int64_t, const GradientGroup*> bucket_closed_at;  // piece's first layer -> its bucket
  for (const GradientGroup& bucket : buckets) bucket_closed_at[bucket.first] = &bucket;

  const LayerRange layers = all_layers(profile);
  const int32_t group = workers > 1 ? b.group(all_workers(workers)) : -1;
  const double update_s = exchanged_update_s(profile, cluster, workers);
  ReplicaCompute compute(profile);
  for (int32_t i = 0; i < iterations; ++i) {
    for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) {
      b.add(compute.op(OpKind::kForward, layers, w, i, i));
      Op update = update_op(update_s, layers, w, i, i);
      for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece) {
        const OpId backward = b.add(compute.op(OpKind::kBackward, *piece, w, i, i));
        const auto closed = bucket_closed_at.find(piece->first);
        if (workers == 1 || closed == bucket_closed_at.end()) continue;
        const GradientGroup& bucket = *closed->second;
        update.deps = {b.add(transfer_op(OpKind::kAllReduce, w, i, bucket.bytes, {bucket.first, bucket.last},
                                         {backward}, group, algorithm))};
      }
      b.add(std::move(update));
    }
  }
  return std::move(b).build();
}

}  // namespace trainsim
