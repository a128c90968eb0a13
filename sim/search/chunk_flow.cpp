// The cgdp chunking problem's pieces; see chunk_flow.hpp.
#include "sim/search/chunk_flow.hpp"

#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/data_parallel.hpp"

namespace trainsim::chunk_detail {

ChunkFlow::ChunkFlow(const Cluster& cluster, int64_t workers) : sync_s(cluster.host.stream_sync_s) {
  const std::vector<int64_t> per_machine = workers_per_machine(cluster, workers);
  // The slope is read over a large byte count so that the intercept (a
  // latency) does not swallow it in the subtraction.
  constexpr double kProbeBytes = 1e12;
  const std::vector<double> at_zero = cgdp_chunk_stage_s(0.0, cluster, per_machine);
  const std::vector<double> at_probe = cgdp_chunk_stage_s(kProbeBytes, cluster, per_machine);
  TRAINSIM_CHECK(at_zero.size() <= intercept_s.size(), "cgdp has at most four resources");
  resources = at_zero.size();
  for (size_t r = 0; r < resources; ++r) {
    intercept_s[r] = at_zero[r];
    slope_s_per_byte[r] = (at_probe[r] - at_zero[r]) / kProbeBytes;
  }
}

FlowState ChunkFlow::extend(const FlowState& from, double backward_s, double bytes) const {
  FlowState to = from;
  to[0] += backward_s;
  if (bytes <= 0) return to;
  to[0] += sync_s;
  double end_s = to[0];
  for (size_t r = 0; r < resources; ++r) {
    end_s = std::max(end_s, to[r + 1]) + stage_s(r, bytes);
    to[r + 1] = end_s;
  }
  return to;
}

BackwardPrefix::BackwardPrefix(const Profile& profile) {
  const size_t n = profile.layers.size();
  backward_s.assign(n + 1, 0.0);
  bytes.assign(n + 1, 0.0);
  for (size_t b = 1; b <= n; ++b) {
    const LayerProfile& layer = profile.layers[n - b];
    backward_s[b] = backward_s[b - 1] + layer.backward_s;
    bytes[b] = bytes[b - 1] + layer.param_bytes;
  }
}

std::vector<int64_t> candidate_boundaries(const Profile& profile) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  std::vector<int64_t> boundaries;
  for (int64_t p = n - 1; p >= 1; --p) {
    if (profile.layers[static_cast<size_t>(p)].param_bytes > 0) boundaries.push_back(n - p);
  }
  boundaries.push_back(n);
  return boundaries;
}

double chunking_finish_s(const ChunkFlow& flow, const BackwardPrefix& prefix, const std::vector<int64_t>& boundaries) {
  FlowState state{};
  int64_t from = 0;
  for (int64_t to : boundaries) {
    const size_t a = static_cast<size_t>(from), b = static_cast<size_t>(to);
    state = flow.extend(state, prefix.backward_s[b] - prefix.backward_s[a], prefix.bytes[b] - prefix.bytes[a]);
    from = to;
  }
  return flow.finish_s(state);
}

std::vector<LayerRange> chunks_of_boundaries(const std::vector<int64_t>& boundaries, int64_t layer_count) {
  std::vector<LayerRange> chunks;
  for (size_t c = boundaries.size(); c-- > 0;) {
    const int64_t upper = c == 0 ? 0 : boundaries[c - 1];
    chunks.push_back({layer_count - boundaries[c], layer_count - upper - 1});
  }
  return chunks;
}

double chunking_lower_bound_s(const ChunkFlow& flow, const Profile& profile) {
  const int64_t n = static_cast<int64_t>(profile.layers.size());
  double total_backward_s = 0, total_bytes = 0;
  for (const LayerProfile& layer : profile.layers) {
    total_backward_s += layer.backward_s;
    total_bytes += layer.param_bytes;
  }
  if (total_bytes <= 0) return total_backward_s;  // one chunk, no gradients: T is exactly Σbw
  int64_t top = -1, bottom = -1;                  // the highest and lowest parameter layers
  for (int64_t i = 0; i < n; ++i) {
    if (profile.layers[static_cast<size_t>(i)].param_bytes <= 0) continue;
    if (bottom < 0) bottom = i;
    top = i;
  }
  double down_to_top_s = 0, down_to_bottom_s = 0;  // backward from the last layer through top / bottom
  for (int64_t i = n - 1; i >= bottom; --i) {
    down_to_bottom_s += profile.layers[static_cast<size_t>(i)].backward_s;
    if (i >= top) down_to_top_s += profile.layers[static_cast<size_t>(i)].backward_s;
  }
  const double top_bytes = profile.layers[static_cast<size_t>(top)].param_bytes;
  const double bottom_bytes = profile.layers[static_cast<size_t>(bottom)].param_bytes;
  double bound_s = total_backward_s + flow.sync_s;
  double through_all_s = down_to_bottom_s + flow.sync_s;
  for (size_t r = 0; r < flow.resources; ++r) through_all_s += flow.stage_s(r, bottom_bytes);
  bound_s = std::max(bound_s, through_all_s);
  for (size_t r = 0; r < flow.resources; ++r) {
    double on_r_s = down_to_top_s + flow.sync_s;
    for (size_t before = 0; before < r; ++before) on_r_s += flow.stage_s(before, top_bytes);
    on_r_s += flow.stage_s(r, total_bytes);
    for (size_t after = r + 1; after < flow.resources; ++after) on_r_s += flow.stage_s(after, bottom_bytes);
    bound_s = std::max(bound_s, on_r_s);
  }
  return bound_s;
}

}  // namespace trainsim::chunk_detail
