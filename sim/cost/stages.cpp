// Pipeline stages: placement, per-stage sums, boundary traffic and memory;
// see stages.hpp.
#include "sim/cost/stages.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "model/error.hpp"
#include "sim/cost/common.hpp"

namespace trainsim {

namespace {

int64_t layer_count(const Profile& profile) { return static_cast<int64_t>(profile.layers.size()); }

// stage_of[l] = index of the range holding layer l.
std::vector<int64_t> stage_index(const std::vector<LayerRange>& ranges, int64_t layers) {
  std::vector<int64_t> stage_of(static_cast<size_t>(layers), -1);
  for (size_t k = 0; k < ranges.size(); ++k) {
    for (int64_t l = ranges[k].first; l <= ranges[k].last; ++l) stage_of[l] = static_cast<int64_t>(k);
  }
  return stage_of;
}

int64_t sum_of(const std::vector<int64_t>& values) { return std::accumulate(values.begin(), values.end(), int64_t{0}); }

}  // namespace

std::vector<LayerRange> balanced_partition(const Profile& profile, int64_t stage_count,
                                           const std::vector<int64_t>& replicas) {
  const int64_t n = layer_count(profile);
  TRAINSIM_CHECK(stage_count >= 1 && stage_count <= n, "stage count out of range");
  TRAINSIM_CHECK(replicas.empty() || static_cast<int64_t>(replicas.size()) == stage_count, "replicas per stage");
  auto replicas_of = [&](int64_t k) { return replicas.empty() ? 1.0 : static_cast<double>(replicas[k]); };
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);  // prefix[j] = Σ_{l<j} (F_l + B_l)
  for (int64_t l = 0; l < n; ++l) {
    prefix[l + 1] = prefix[l] + profile.layers[l].forward_s + profile.layers[l].backward_s;
  }

  // best[k][j]: smallest largest stage time splitting layers [0, j) into k+1 stages;
  // cut[k][j]: where the last of those stages starts. O(K·n²) with a cut-off:
  // scanning the start i downwards only grows the last stage, so stop once it
  // alone reaches the best found.
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stage_count, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(stage_count, std::vector<int64_t>(n + 1, 0));
  for (int64_t j = 1; j <= n; ++j) best[0][j] = prefix[j] / replicas_of(0);
  for (int64_t k = 1; k < stage_count; ++k) {
    for (int64_t j = k + 1; j <= n - (stage_count - 1 - k); ++j) {
      for (int64_t i = j - 1; i >= k; --i) {
        const double last_stage = (prefix[j] - prefix[i]) / replicas_of(k);
        if (last_stage >= best[k][j]) break;
        const double candidate = std::max(best[k - 1][i], last_stage);
        if (candidate < best[k][j]) {
          best[k][j] = candidate;
          cut[k][j] = i;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(static_cast<size_t>(stage_count));
  int64_t end = n;
  for (int64_t k = stage_count - 1; k >= 0; --k) {
    const int64_t start = k == 0 ? 0 : cut[k][end];
    ranges[k] = {start, end - 1};
    end = start;
  }
  return ranges;
}

std::vector<double> boundary_bytes(const Profile& profile, const std::vector<LayerRange>& ranges) {
  const int64_t n = layer_count(profile);
  const std::vector<int64_t> stage_of = stage_index(ranges, n);
  std::unordered_map<std::string, int64_t> index;
  for (int64_t l = 0; l < n; ++l) index[profile.layers[l].name] = l;
  // last_use[l]: the latest stage reading layer l's output.
  std::vector<int64_t> last_use(stage_of);
  for (int64_t c = 0; c < n; ++c) {
    for (const std::string& input : profile.layers[c].inputs) {
      auto it = index.find(input);
      if (it == index.end()) continue;  // the model input: not a layer, no bytes in the profile
      last_use[it->second] = std::max(last_use[it->second], stage_of[c]);
    }
  }
  // Layer l's output crosses boundaries stage_of[l] .. last_use[l]-1; summing
  // per boundary (at most layers × stages steps) keeps a zero exactly zero.
  std::vector<double> bytes(ranges.empty() ? 0 : ranges.size() - 1, 0.0);
  for (int64_t l = 0; l < n; ++l) {
    for (int64_t b = stage_of[l]; b < last_use[l]; ++b) bytes[b] += profile.layers[l].activation_bytes;
  }
  return bytes;
}

double transfer_s(double bytes, const LinkSpec& link) { return bytes / link.bandwidth_bytes_per_s + link.latency_s; }

// docs/equations.md §4: 2·a/B, plus a latency for each of the two messages.
double boundary_comm_s(double bytes, const LinkSpec& link) { return 2.0 * transfer_s(bytes, link); }

int64_t machine_of(int64_t device, const Cluster& cluster) { return device / cluster.devices_per_machine; }

const LinkSpec& link_spanning(int64_t first_device, int64_t last_device, const Cluster& cluster) {
  return machine_of(first_device, cluster) == machine_of(last_device, cluster) ? cluster.intra_link
                                                                               : cluster.inter_link;
}

Pipeline build_pipeline(const Profile& profile, const Cluster& cluster, const std::vector<LayerRange>& ranges,
                        const std::vector<int64_t>& replicas) {
  TRAINSIM_CHECK(!ranges.empty() && ranges.size() == replicas.size(), "one replica count per stage");
  TRAINSIM_CHECK(sum_of(replicas) <= device_count(cluster), "more replicas than devices");
  const std::vector<double> crossing = boundary_bytes(profile, ranges);
  Pipeline p;
  int64_t next_device = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const ModelTotals t = range_totals(profile, ranges[k].first, ranges[k].last);
    PipelineStage s;
    s.layers = ranges[k];
    s.replicas = replicas[k];
    s.first_device = next_device;
    s.forward_s = t.forward_s;
    s.backward_s = t.backward_s;
    s.forward_fixed_s = t.forward_fixed_s;
    s.backward_fixed_s = t.backward_fixed_s;
    s.update_s = range_update_s(profile, ranges[k].first, ranges[k].last, cluster);
    s.param_bytes = t.param_bytes;
    s.activation_bytes = t.activation_bytes;
    s.input_bytes = k == 0 ? 0.0 : crossing[k - 1];
    s.output_bytes = k + 1 == ranges.size() ? 0.0 : crossing[k];
    s.replica_link = link_spanning(next_device, next_device + s.replicas - 1, cluster);
    s.weight_sync_s = weight_sync_s(s.replicas, s.param_bytes, s.replica_link);
    next_device += s.replicas;
    p.stages.push_back(s);
  }
  p.devices = next_device;
  for (size_t b = 0; b < crossing.size(); ++b) {
    const PipelineStage& before = p.stages[b];
    const PipelineStage& after = p.stages[b + 1];
    StageBoundary boundary;
    boundary.bytes = crossing[b];
    boundary.link = link_spanning(before.first_device, after.first_device + after.replicas - 1, cluster);
    boundary.comm_s = boundary_comm_s(boundary.bytes, boundary.link);
    p.boundaries.push_back(boundary);
  }
  return p;
}

SpecTrainWork spectrain_work(const Pipeline& pipe, int64_t k) {
  const int64_t stages = pipe.stage_count();
  TRAINSIM_CHECK(k >= 0 && k < stages, "stage outside the pipeline");
  const double pass_s = spectrain_pass_s(pipe.stages[static_cast<size_t>(k)].update_s);
  SpecTrainWork work;
  work.forward_s = 2 * stages - k - 2 > 0 ? pass_s : 0.0;
  work.backward_s = k > 0 ? pass_s : 0.0;
  work.update_s = pass_s;
  return work;
}

Breakdown device_breakdown(double iteration_s, double compute_s, double exposed_comm_s, double idle_transfer_s) {
  Breakdown b;
  b.compute_s = compute_s;
  b.exposed_comm_s = exposed_comm_s;
  b.idle_transfer_s = idle_transfer_s;
  const double rest_s = iteration_s - compute_s - exposed_comm_s - idle_transfer_s;
  TRAINSIM_CHECK(rest_s >= -1e-9 * iteration_s, "a device is busier than the iteration");
  b.idle_imbalance_s = std::max(0.0, rest_s);
  return b;
}

Breakdown average_breakdown(const Pipeline& pipeline, const std::vector<Breakdown>& per_stage) {
  TRAINSIM_CHECK(per_stage.size() == pipeline.stages.size(), "one breakdown per stage");
  Breakdown sum;
  for (size_t k = 0; k < per_stage.size(); ++k) {
    const double r = static_cast<double>(pipeline.stages[k].replicas);
    sum.compute_s += r * per_stage[k].compute_s;
    sum.exposed_comm_s += r * per_stage[k].exposed_comm_s;
    sum.idle_transfer_s += r * per_stage[k].idle_transfer_s;
    sum.idle_imbalance_s += r * per_stage[k].idle_imbalance_s;
  }
  const double devices = static_cast<double>(pipeline.devices);
  return {sum.compute_s / devices, sum.exposed_comm_s / devices, sum.idle_transfer_s / devices,
          sum.idle_imbalance_s / devices};
}

DeviceMemory stage_memory(const Profile& profile, const PipelineStage& stage, double batches_in_flight) {
  DeviceMemory m = replica_memory(profile, stage.layers.first, stage.layers.last, batches_in_flight);
  // The received inputs stay until the stage's first layers have run their backward.
  m.activations_bytes += batches_in_flight * stage.input_bytes;
  return m;
}

std::vector<DeviceMemory> per_device_memory(const Pipeline& pipeline, const std::vector<DeviceMemory>& per_stage) {
  TRAINSIM_CHECK(per_stage.size() == pipeline.stages.size(), "one memory entry per stage");
  std::vector<DeviceMemory> memory;
  for (size_t k = 0; k < per_stage.size(); ++k) {
    memory.insert(memory.end(), static_cast<size_t>(pipeline.stages[k].replicas), per_stage[k]);
  }
  return memory;
}

int64_t one_f_one_b_in_flight(const Pipeline& pipeline, int64_t stage) {
  int64_t downstream_devices = 0;
  for (int64_t j = stage; j < pipeline.stage_count(); ++j) downstream_devices += pipeline.stages[j].replicas;
  const int64_t r = pipeline.stages[stage].replicas;
  return (downstream_devices + r - 1) / r;
}

int64_t largest_weighted_lag(const Pipeline& pipeline, const std::function<int64_t(int64_t stage)>& lag) {
  int64_t largest = 0;
  for (int64_t k = 0; k < pipeline.stage_count(); ++k) {
    if (pipeline.stages[k].param_bytes > 0) largest = std::max(largest, lag(k));
  }
  return largest;
}

std::vector<DeviceMemory> weight_stashing_memory(const Profile& profile, const Pipeline& pipeline) {
  std::vector<DeviceMemory> per_stage;
  for (int64_t k = 0; k < pipeline.stage_count(); ++k) {
    const PipelineStage& s = pipeline.stages[k];
    const int64_t in_flight = one_f_one_b_in_flight(pipeline, k);
    DeviceMemory m = stage_memory(profile, s, static_cast<double>(in_flight));
    m.stashed_bytes = static_cast<double>(in_flight - 1) * s.param_bytes;
    per_stage.push_back(m);
  }
  return per_device_memory(pipeline, per_stage);
}

void finish_flushed_pipeline(Prediction& p, const Profile& profile, const Pipeline& pipe, int64_t microbatches,
                             double barrier_s, double compute_only_s, const std::function<double(int64_t)>& in_flight,
                             const StrategyConfig& config) {
  const double m = static_cast<double>(microbatches);
  std::vector<Breakdown> per_stage;
  std::vector<DeviceMemory> memory;
  for (int64_t k = 0; k < pipe.stage_count(); ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    // M micro-batches: the whole stage time plus M − 1 more fixed parts.
    const double compute_s =
        m * (scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / m) + scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / m)) /
            static_cast<double>(s.replicas) +
        s.update_s;
    per_stage.push_back(device_breakdown(p.iteration_s, compute_s, s.weight_sync_s + barrier_s,
                                         p.iteration_s - compute_only_s - barrier_s));
    memory.push_back(stage_memory(profile, s, in_flight(k)));
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = per_device_memory(pipe, memory);
  p.staleness = 0;
  finish_prediction(p, config);
}

}  // namespace trainsim
