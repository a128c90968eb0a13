// Sweeps over dp-overlap's bucket size and pipesgd's segment count; see
// sync_size.hpp.
#include "sim/search/sync_size.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim {
namespace {

int64_t layers_with_params(const Profile& profile) {
  return std::count_if(profile.layers.begin(), profile.layers.end(),
                       [](const LayerProfile& l) { return l.param_bytes > 0; });
}

}  // namespace

std::vector<double> bucket_size_candidates(const Profile& profile) {
  constexpr double kSmallestBucketBytes = 64.0 * 1024;
  std::vector<double> sizes = {kDefaultBucketBytes};
  const double total = total_param_bytes(profile);
  for (double size = kSmallestBucketBytes;; size *= 2) {
    if (size != kDefaultBucketBytes) sizes.push_back(size);
    if (size >= total) break;
  }
  return sizes;
}

double best_bucket_bytes(const Profile& profile, const Cluster& cluster, int64_t workers,
                         CollectiveAlgorithm algorithm) {
  double best_bytes = kDefaultBucketBytes;
  if (workers <= 1 || total_param_bytes(profile) <= 0) return best_bytes;
  double best_s = overlap_backward_end_s(profile, cluster, workers, algorithm, best_bytes);
  for (double bytes : bucket_size_candidates(profile)) {
    const double end_s = overlap_backward_end_s(profile, cluster, workers, algorithm, bytes);
    if (end_s < best_s) {
      best_s = end_s;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

int64_t best_pipesgd_segments(const Profile& profile, const Cluster& cluster, PipeSgdSettings settings) {
  constexpr int64_t kMostSegmentsSearched = 256;
  const int64_t most = std::min<int64_t>(kMostSegmentsSearched, std::max<int64_t>(1, layers_with_params(profile)));
  int64_t best = 1;
  double best_s = 0;
  for (int64_t s = 1; s <= most; ++s) {
    settings.segments = s;
    const PipeSgdTimes times = pipesgd_times(profile, cluster, settings);
    const double iteration_s = times.compute_s + times.exposed_s;
    if (s == 1 || iteration_s < best_s) {
      best = s;
      best_s = iteration_s;
    }
  }
  return best;
}

}  // namespace trainsim
