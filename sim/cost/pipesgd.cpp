// `pipesgd` (seed 002, Li et al. NeurIPS 2018; docs/equations.md §1): iterations
// pipelined K wide, so iteration i's gradient AllReduce overlaps iteration
// i+1's compute and updates use gradients K-1 iterations old; optional
// lossy compression on the wire; gradients sent whole after backward
// (S = 1) or in S segments as backward produces them.
#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/search/sync_size.hpp"

namespace trainsim {

PipeSgdSettings resolve_pipesgd_settings(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  PipeSgdSettings settings;
  settings.workers = resolve_workers(config, cluster);
  settings.algorithm = read_collective_algorithm(config);
  settings.width = config.get_int("width", 2, 1);
  // The steady state the cost model prices starts after the warm-up.
  settings.warmup = config.get_int("warmup", 0, 0);
  settings.compression = config.get_choice("compression", "none", {"none", "trunc16", "quant8"});
  if (config.has("segments")) {
    settings.segments = config.get_int("segments", 1, 1);
  } else {
    settings.segments = best_pipesgd_segments(profile, cluster, settings);
    config.record("segments", settings.segments);
  }
  return settings;
}

Prediction predict_pipesgd(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const PipeSgdSettings settings = resolve_pipesgd_settings(profile, cluster, config);
  const int64_t width = settings.width;
  const std::string& compression = settings.compression;
  const ModelTotals t = model_totals(profile);
  const PipeSgdTimes times = pipesgd_times(profile, cluster, settings);
  const int64_t workers = settings.workers;
  const double compute_s = times.compute_s;
  const double exposed_s = times.exposed_s;
  Prediction p = data_parallel_prediction("pipesgd", profile, workers, compute_s, exposed_s);
  // K-1 aggregated gradients wait in flight besides the one being computed;
  // with compression, the narrow copy on the wire as well.
  for (DeviceMemory& m : p.memory) {
    m.gradients_bytes += static_cast<double>(width - 1) * t.param_bytes;
    if (compression != "none" && workers > 1) m.gradients_bytes += t.param_bytes * wire_fraction(compression);
  }
  p.staleness = width - 1;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
