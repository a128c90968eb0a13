// `pipesgd` (seed 002, Li et al. NeurIPS 2018; docs/equations.md §1): iterations
// pipelined K wide, so iteration i's gradient AllReduce overlaps iteration
// i+1's compute and updates use gradients K-1 iterations old; optional
// lossy compression on the wire; gradients sent whole after backward
// (S = 1) or in S segments as backward produces them.
#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/sync_size.hpp"

namespace trainsim {

double wire_fraction(const std::string& compression) {
  if (compression == "trunc16") return 0.5;
  if (compression == "quant8") return 0.25;
  TRAINSIM_CHECK(compression == "none", "unknown compression " + compression);
  return 1.0;
}

namespace {

struct PipeSgdComm {
  double sequential_s = 0;  // eq. (5)'s communication: AllReduce(M') + t_sync after backward
  double segmented_s = 0;   // eq. (6)'s: t_bw(first segment) + S·(AllReduce(M'/S) + t_sync)
};

// For the ring, S·AllReduce(M'/S) = S·2(N-1)α + 2((N-1)/N)M'β + ((N-1)/N)M'γ,
// exactly eq. (6)'s communication term; other algorithms follow the same rule.
PipeSgdComm communication(const Profile& profile, const Cluster& cluster, int64_t workers,
                          CollectiveAlgorithm algorithm, double gradient_bytes, double wire_bytes,
                          int64_t segments) {
  const LinkParams link = collective_link(cluster, workers);
  PipeSgdComm c;
  c.sequential_s =
      allreduce_s(algorithm, wire_bytes, workers, link) + collective_call_overhead_s(cluster, wire_bytes, workers);
  const double s = static_cast<double>(segments);
  const std::vector<GradientGroup> groups = group_gradients_by_bytes(profile, gradient_bytes / s);
  const double first_segment_bw_s = groups.empty() ? 0.0 : groups.front().ready_s;
  c.segmented_s = first_segment_bw_s + s * (allreduce_s(algorithm, wire_bytes / s, workers, link) +
                                            collective_call_overhead_s(cluster, wire_bytes / s, workers));
  return c;
}

}  // namespace

// docs/equations.md §1. K = 1: eq. (2), t = t_up + t_fw + t_bw + t_compress + t_comm
// (S > 1 overlaps t_comm with backward: t_up + t_fw + t_compress +
// max(t_bw, eq. (6)'s communication term)). K >= 2: eq. (5)
// max(t_up + t_fw + t_bw + t_compress, AllReduce(M') + t_sync) for S = 1,
// eq. (6) max(t_up + t_fw + t_bw + t_compress, t_bw(first segment) +
// S·(2(N-1)α + t_sync) + 2((N-1)/N)M'β + ((N-1)/N)M'γ) for S > 1.
PipeSgdTimes pipesgd_times(const Profile& profile, const Cluster& cluster, const PipeSgdSettings& settings) {
  const ModelTotals t = model_totals(profile);
  PipeSgdTimes times;
  const bool exchanges = settings.workers > 1 && t.param_bytes > 0;
  times.compute_s = t.forward_s + t.backward_s + exchanged_update_s(profile, cluster, exchanges ? settings.workers : 1);
  if (!exchanges) return times;
  const double wire_bytes = t.param_bytes * wire_fraction(settings.compression);
  if (settings.compression != "none") {
    times.compute_s += kCompressionPassesPerGradientByte * t.param_bytes / cluster.device.memory_bytes_per_s;
  }
  const PipeSgdComm comm = communication(profile, cluster, settings.workers, settings.algorithm, t.param_bytes,
                                         wire_bytes, settings.segments);
  if (settings.width == 1 && settings.segments == 1) {
    times.exposed_s = comm.sequential_s;
  } else if (settings.width == 1) {
    times.exposed_s = std::max(0.0, comm.segmented_s - t.backward_s);
  } else {
    times.exposed_s =
        std::max(0.0, (settings.segments == 1 ? comm.sequential_s : comm.segmented_s) - times.compute_s);
  }
  return times;
}

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
