// Shared data-parallel cost-model pieces; see data_parallel.hpp.
#include "sim/cost/data_parallel.hpp"

#include <algorithm>
#include <cmath>

#include "model/error.hpp"
#include "sim/cost/common.hpp"

namespace trainsim {

Prediction data_parallel_prediction(const std::string& strategy, const Profile& profile, int64_t workers,
                                    double compute_s, double exposed_comm_s) {
  TRAINSIM_CHECK(workers >= 1, "data parallel needs at least one worker");
  Prediction p;
  p.strategy = strategy;
  p.workers = workers;
  p.iteration_s = compute_s + exposed_comm_s;
  p.samples_per_iteration = static_cast<double>(workers * profile.batch_size);
  p.breakdown.compute_s = compute_s;
  p.breakdown.exposed_comm_s = exposed_comm_s;
  const int64_t last = static_cast<int64_t>(profile.layers.size()) - 1;
  p.memory.assign(static_cast<size_t>(workers), replica_memory(profile, 0, last, 1.0));
  return p;
}

CollectiveAlgorithm read_collective_algorithm(StrategyConfig& config) {
  const std::string name = config.get_choice("algorithm", "ring", collective_algorithm_names());
  return parse_collective_algorithm(name, "--set algorithm");
}

std::vector<GradientGroup> group_gradients_by_bytes(const Profile& profile, double group_bytes) {
  TRAINSIM_CHECK(group_bytes > 0, "gradient groups need a positive size");
  std::vector<GradientGroup> groups;
  GradientGroup open;
  double backward_s = 0;
  for (int64_t i = static_cast<int64_t>(profile.layers.size()) - 1; i >= 0; --i) {
    const LayerProfile& layer = profile.layers[static_cast<size_t>(i)];
    backward_s += layer.backward_s;
    if (layer.param_bytes <= 0) continue;
    if (open.bytes == 0) open.last = i;
    open.first = i;
    open.bytes += layer.param_bytes;
    open.ready_s = backward_s;
    if (open.bytes >= group_bytes) {
      groups.push_back(open);
      open = GradientGroup{};
    }
  }
  if (open.bytes > 0) groups.push_back(open);
  return groups;
}

double flow_shop_end_s(const std::vector<double>& ready_s, const std::vector<std::vector<double>>& stage_s) {
  TRAINSIM_CHECK(ready_s.size() == stage_s.size(), "flow shop: one ready time per job");
  std::vector<double> free_s;  // when each resource finishes its latest job
  double end_s = 0;
  for (size_t j = 0; j < ready_s.size(); ++j) {
    if (free_s.empty()) free_s.assign(stage_s[j].size(), 0.0);
    TRAINSIM_CHECK(stage_s[j].size() == free_s.size(), "flow shop: every job passes every resource");
    end_s = ready_s[j];
    for (size_t k = 0; k < free_s.size(); ++k) {
      end_s = std::max(end_s, free_s[k]) + stage_s[j][k];
      free_s[k] = end_s;
    }
  }
  return end_s;
}

std::vector<int64_t> workers_per_machine(const Cluster& cluster, int64_t workers) {
  TRAINSIM_CHECK(workers >= 1 && workers <= device_count(cluster), "workers must fit the cluster");
  std::vector<int64_t> counts;
  for (int64_t left = workers; left > 0; left -= cluster.devices_per_machine) {
    counts.push_back(std::min(left, cluster.devices_per_machine));
  }
  return counts;
}

// Buckets fill in reverse layer order and close when a layer brings them to
// bucket_bytes; bucket b's AllReduce (+ t_sync) starts at max(its last layer's
// backward end, the end of bucket b-1's AllReduce);
// t = Σfw + max(Σbw, end of the last AllReduce) + update.
double overlap_backward_end_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                              CollectiveAlgorithm algorithm, double bucket_bytes) {
  const double backward_s = model_totals(profile).backward_s;
  if (workers <= 1) return backward_s;
  const LinkParams link = collective_link(cluster, workers, algorithm);
  std::vector<double> ready_s;
  std::vector<std::vector<double>> allreduce_s_each;
  for (const GradientGroup& b : group_gradients_by_bytes(profile, bucket_bytes)) {
    ready_s.push_back(b.ready_s);
    allreduce_s_each.push_back(
        {allreduce_s(algorithm, b.bytes, workers, link) +
         collective_call_overhead_s(cluster, b.bytes, workers, algorithm, workers > cluster.devices_per_machine)});
  }
  return std::max(backward_s, flow_shop_end_s(ready_s, allreduce_s_each));
}

double compression_work_s(const Cluster& cluster, const std::string& compression, double gradient_bytes) {
  if (compression == "none") return 0;
  const CodecRates& rates = compression == "trunc16" ? cluster.collective.trunc16 : cluster.collective.quant8;
  if (rates.encode_bytes_per_s > 0 || rates.decode_bytes_per_s > 0) return 0;
  return kCompressionPassesPerGradientByte * gradient_bytes / cluster.device.memory_bytes_per_s;
}

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
// With compression each AllReduce also runs the codec at its hops
// (ring_codec_s of the segment's float32 bytes), and packs the float32
// bytes (collective_call_overhead_s).
PipeSgdComm communication(const Profile& profile, const Cluster& cluster, int64_t workers,
                          CollectiveAlgorithm algorithm, double gradient_bytes, const std::string& compression,
                          int64_t segments) {
  const LinkParams link = collective_link(cluster, workers, algorithm);
  const bool crosses = workers > cluster.devices_per_machine;
  const double wire_bytes = gradient_bytes * wire_fraction(compression);
  PipeSgdComm c;
  c.sequential_s = allreduce_s(algorithm, wire_bytes, workers, link) +
                   collective_call_overhead_s(cluster, gradient_bytes, workers, algorithm, crosses) +
                   ring_codec_s(cluster, compression, gradient_bytes, workers);
  const double s = static_cast<double>(segments);
  const std::vector<GradientGroup> groups = group_gradients_by_bytes(profile, gradient_bytes / s);
  const double first_segment_bw_s = groups.empty() ? 0.0 : groups.front().ready_s;
  c.segmented_s =
      first_segment_bw_s + s * (allreduce_s(algorithm, wire_bytes / s, workers, link) +
                                collective_call_overhead_s(cluster, gradient_bytes / s, workers, algorithm, crosses) +
                                ring_codec_s(cluster, compression, gradient_bytes / s, workers));
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
  times.compute_s += compression_work_s(cluster, settings.compression, t.param_bytes);
  const PipeSgdComm comm = communication(profile, cluster, settings.workers, settings.algorithm, t.param_bytes,
                                         settings.compression, settings.segments);
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

VariableBytes variable_bytes(const Profile& profile) {
  VariableBytes v;
  for (const LayerProfile& l : profile.layers) {
    if (l.sparse) {
      v.sparse += l.param_bytes;
      v.sparse_touched += l.sparsity * l.param_bytes;
    } else {
      v.dense += l.param_bytes;
    }
  }
  return v;
}

double sparse_union_bytes(const Profile& profile, int64_t d) {
  double bytes = 0;
  for (const LayerProfile& l : profile.layers) {
    if (l.sparse) bytes += l.param_bytes * touched_fraction(l, d);
  }
  return bytes;
}

}  // namespace trainsim
