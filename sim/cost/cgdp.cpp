// `cgdp`: CPU-GPU data parallel (seed 003, Le et al. ICPE 2018; docs/equations.md
// §7). During backward, each chunk of layers' gradients goes to host memory as
// soon as backward has passed it, host threads sum the devices' copies, and
// the sum goes back to every device, all overlapped with the rest of backward.
#include <algorithm>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/chunk.hpp"

namespace trainsim {

std::vector<LayerRange> seed_chunk_layout(const Profile& profile, int64_t chunk_size) {
  const int64_t layer_count = static_cast<int64_t>(profile.layers.size());
  std::vector<int64_t> with_params;
  for (int64_t i = 0; i < layer_count; ++i) {
    if (profile.layers[static_cast<size_t>(i)].param_bytes > 0) with_params.push_back(i);
  }
  const int64_t l = static_cast<int64_t>(with_params.size());
  if (l == 0) return {{0, layer_count - 1}};
  if (chunk_size > l) {
    throw InputError("--set chunk_size", "is " + std::to_string(chunk_size),
                     "at most the " + std::to_string(l) + " layers with parameters");
  }
  const int64_t big = l % chunk_size == 0 ? l / chunk_size - 1 : l / chunk_size;
  std::vector<int64_t> lowest;  // lowest parameter layer of each chunk, in backward order
  for (int64_t c = 0; c < big; ++c) lowest.push_back(with_params[static_cast<size_t>(l - (c + 1) * chunk_size)]);
  for (int64_t i = l - big * chunk_size - 1; i >= 0; --i) lowest.push_back(with_params[static_cast<size_t>(i)]);
  std::vector<LayerRange> ranges;  // ascending, as get_ranges returns them
  if (lowest.back() > 0) ranges.push_back({0, lowest.back() - 1});
  for (size_t c = lowest.size(); c-- > 0;) {
    ranges.push_back({lowest[c], c == 0 ? layer_count - 1 : lowest[c - 1] - 1});
  }
  return ranges;
}

namespace {

std::string ranges_text(const std::vector<LayerRange>& ranges) {
  std::string text;
  for (const LayerRange& r : ranges) {
    if (!text.empty()) text += ',';
    text += std::to_string(r.first);
    text += '-';
    text += std::to_string(r.last);
  }
  return text;
}

}  // namespace

// The chunk's three (four across machines) in-order resources, as described
// at cgdp_backward_s: D2H, host accumulation, [hosts' ring AllReduce], H2D.
std::vector<double> cgdp_chunk_stage_s(double bytes, const Cluster& cluster,
                                       const std::vector<int64_t>& per_machine) {
  const int64_t machines = static_cast<int64_t>(per_machine.size());
  const double copy_s = cluster.host.link_latency_s + bytes / cluster.host.link_bandwidth_bytes_per_s;
  std::vector<double> stages = {copy_s,
                                static_cast<double>(per_machine.front()) * bytes / cluster.host.reduce_bytes_per_s};
  if (machines > 1) {
    const LinkParams hosts{cluster.inter_link.latency_s, 1.0 / cluster.inter_link.bandwidth_bytes_per_s,
                           1.0 / cluster.host.reduce_bytes_per_s};
    stages.push_back(allreduce_ring_s(bytes, machines, hosts));
  }
  stages.push_back(copy_s);
  return stages;
}

// Seed 003 §3.2, Definitions 3.2-3.3 with chunks (§4.1): backward walks the
// chunks from the last; after a chunk with gradients, the default stream
// synchronizes with the host (t_as, Step B-4-1), which holds back the next
// chunk's backward, as T_BP^i = Σ_{j>=i}(t_bp^j + t_as^j) + t_aa^i + t_bc^i
// has it. The chunk then passes three in-order resources: D2H (latency +
// bytes / host link, every device over its own link at once), host
// accumulation (devices on the machine × bytes / host.reduce_bytes_per_s),
// H2D back (latency + bytes / host link). Across machines (beyond the seed,
// which has one) the hosts then ring-AllReduce the chunk over the network
// before the H2D. Returns T = max(backward with syncs, last H2D end).
double cgdp_backward_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                       const std::vector<LayerRange>& chunks) {
  const std::vector<int64_t> per_machine = workers_per_machine(cluster, workers);
  double clock_s = 0;
  std::vector<double> ready_s;
  std::vector<std::vector<double>> stage_s;
  for (size_t c = chunks.size(); c-- > 0;) {
    const ModelTotals chunk = range_totals(profile, chunks[c].first, chunks[c].last);
    clock_s += chunk.backward_s;
    if (chunk.param_bytes <= 0) continue;  // nothing to send, nothing to wait for
    clock_s += cluster.host.stream_sync_s;
    ready_s.push_back(clock_s);
    stage_s.push_back(cgdp_chunk_stage_s(chunk.param_bytes, cluster, per_machine));
  }
  return std::max(clock_s, flow_shop_end_s(ready_s, stage_s));
}

CgdpChunks resolve_cgdp_chunks(const Profile& profile, const Cluster& cluster, int64_t workers,
                               StrategyConfig& config) {
  const int64_t layer_count = static_cast<int64_t>(profile.layers.size());
  if (config.has("chunks") && config.has("chunk_size")) {
    throw InputError("--set chunks", "is set together with chunk_size", "either chunks or chunk_size, not both");
  }
  CgdpChunks chunks;
  if (config.has("chunks")) {
    chunks.ranges = config.get_ranges("chunks", layer_count);
    chunks.source = "given";
  } else if (config.has("chunk_size") || workers <= 1) {
    const int64_t size = config.get_int("chunk_size", 1, 1);
    chunks.ranges = seed_chunk_layout(profile, size);
    chunks.source = "chunk_size " + std::to_string(size);
  } else {
    const Chunking best = bounded_cgdp_chunking(profile, cluster, workers);
    chunks.ranges = best.chunks;
    chunks.source = best.optimal ? "exact optimum"
                                 : "bounded search, within " + format_percent(best.optimality_gap()) + " of the optimum";
  }
  config.record("chunks", ranges_to_json(chunks.ranges));
  return chunks;
}

// docs/equations.md §7: iteration = Σfw + T + update, T = max_i T_BP^i; one worker
// needs no synchronization (seed 003 Table 2: 1-GPU CGDP equals 1-GPU Caffe).
Prediction predict_cgdp(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t workers = resolve_workers(config, cluster);
  const CgdpChunks resolved = resolve_cgdp_chunks(profile, cluster, workers, config);
  const std::vector<LayerRange>& chunks = resolved.ranges;
  const ModelTotals t = model_totals(profile);
  const double backward_s = workers > 1 ? cgdp_backward_s(profile, cluster, workers, chunks) : t.backward_s;
  const double compute_s = t.forward_s + t.backward_s + exchanged_update_s(profile, cluster, workers);
  Prediction p = data_parallel_prediction("cgdp", profile, workers, compute_s, backward_s - t.backward_s);
  if (resolved.source != "given") p.notes.push_back("chunks " + ranges_text(chunks) + " (" + resolved.source + ")");
  if (workers > cluster.devices_per_machine) {
    p.notes.push_back("hosts of different machines all-reduce each chunk over the network (seed 003 has one machine)");
  }
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
