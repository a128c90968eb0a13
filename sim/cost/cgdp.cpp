// `cgdp`: CPU-GPU data parallel (seed 003, Le et al. ICPE 2018; docs/equations.md
// §7). During backward, each chunk of layers' gradients goes to host memory as
// soon as backward has passed it, host threads sum the devices' copies, and
// the sum goes back to every device, all overlapped with the rest of backward.
#include <algorithm>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/search/chunk.hpp"

namespace trainsim {

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
