// `dp-overlap`: data parallel with gradients packed into buckets as backward
// produces them, each bucket all-reduced while backward goes on (common
// practice: PyTorch DDP, Horovod tensor fusion). One collective at a time.
#include <algorithm>

#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/search/sync_size.hpp"

namespace trainsim {

double resolve_bucket_bytes(const Profile& profile, const Cluster& cluster, int64_t workers,
                            CollectiveAlgorithm algorithm, StrategyConfig& config) {
  if (config.has("bucket_bytes")) return config.get_bytes("bucket_bytes", kDefaultBucketBytes);
  const double bucket_bytes = best_bucket_bytes(profile, cluster, workers, algorithm);
  config.record("bucket_bytes", bucket_bytes);
  return bucket_bytes;
}

Prediction predict_dp_overlap(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const double bucket_bytes = resolve_bucket_bytes(profile, cluster, workers, algorithm, config);
  const ModelTotals t = model_totals(profile);
  const std::vector<GradientGroup> buckets = group_gradients_by_bytes(profile, bucket_bytes);
  const double backward_end_s = overlap_backward_end_s(profile, cluster, workers, algorithm, bucket_bytes);
  const double compute_s = t.forward_s + t.backward_s + exchanged_update_s(profile, cluster, workers);
  Prediction p = data_parallel_prediction("dp-overlap", profile, workers, compute_s, backward_end_s - t.backward_s);
  // Gradients are copied into flat bucket buffers for the collective (PyTorch
  // DDP's default): one more copy of the gradients.
  if (workers > 1) {
    for (DeviceMemory& m : p.memory) m.gradients_bytes += t.param_bytes;
  }
  p.notes.push_back(std::to_string(buckets.size()) + " gradient buckets of " + format_bytes(bucket_bytes) +
                    (config.has("bucket_bytes") ? "" : " (searched)"));
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
