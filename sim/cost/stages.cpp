// Pipeline stages: partition resolution, placement and per-stage sums; see
// stages.hpp.
#include "sim/cost/stages.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/search/partition.hpp"

namespace trainsim {

const PartitionDefaults kPipedreamPartition{PartitionObjective::kOneFOneB, true};
const PartitionDefaults kPipedreamSyncPartition{PartitionObjective::kOneFOneB, false};
const PartitionDefaults kDualpipePartition{PartitionObjective::kDualPipe, false};
const PartitionDefaults kGpipePartition{PartitionObjective::kGPipe, false};
const PartitionDefaults kDspPartition{PartitionObjective::kDsp, false};

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

// Checks the `replicas` list (entries already >= 1) against the stage count and the cluster.
void check_replicas(const std::vector<int64_t>& replicas, int64_t stages, const Cluster& cluster) {
  if (static_cast<int64_t>(replicas.size()) != stages) {
    throw InputError("--set replicas",
                     "has " + std::to_string(replicas.size()) + " entries for " + std::to_string(stages) + " stages",
                     "one replica count per stage");
  }
  const int64_t devices = device_count(cluster);
  // Summed as doubles: counts near 2^63 must not wrap around to a small sum.
  const double needed = std::accumulate(replicas.begin(), replicas.end(), 0.0,
                                        [](double sum, int64_t r) { return sum + static_cast<double>(r); });
  if (needed > static_cast<double>(devices)) {
    throw InputError("--set replicas", "needs " + format_count(needed) + " devices",
                     "at most the " + std::to_string(devices) + " devices of " + cluster.name);
  }
}

void check_stage_count(int64_t stages, const Profile& profile, const Cluster& cluster, const std::string& where) {
  if (stages < 1 || stages > layer_count(profile)) {
    throw InputError(where, std::to_string(stages) + " stages for " + std::to_string(layer_count(profile)) + " layers",
                     "between 1 stage and one stage per layer");
  }
  if (stages > device_count(cluster)) {
    throw InputError(where, std::to_string(stages) + " stages",
                     "at most one stage per device: " + std::to_string(device_count(cluster)) + " on " + cluster.name);
  }
}

// A stage count whose ranges the partition search chooses: K·n within kMaxPartitionCells.
void check_partition_work(int64_t stages, const Profile& profile, const std::string& where) {
  const int64_t most = std::max<int64_t>(1, kMaxPartitionCells / std::max<int64_t>(1, layer_count(profile)));
  if (stages > most) {
    throw InputError(where, std::to_string(stages) + " stages to place over " + std::to_string(layer_count(profile)) +
                                " layers",
                     "at most " + std::to_string(most) + " stages (stages x layers <= " +
                         std::to_string(kMaxPartitionCells) + ", the partition search's bound), or the ranges in full");
  }
}

std::string describe(const std::vector<LayerRange>& ranges) {
  std::vector<std::string> parts;
  for (const LayerRange& r : ranges) parts.push_back(std::to_string(r.first) + "-" + std::to_string(r.last));
  return join(parts, ",");
}

// The partition search for a default partition: the best partition that fits
// the device memory, else (noted) the best one regardless, whose prediction
// then shows the memory it lacks. Flat (replicas on consecutive devices, as
// build_pipeline places them).
Partition search_default_partition(const Profile& profile, const Cluster& cluster, PartitionOptions options,
                                   std::vector<std::string>& notes) {
  options.hierarchical = false;
  try {
    return search_partition(profile, cluster, options);
  } catch (const InputError& e) {
    if (e.where() != "--memory-limit") throw;
    notes.push_back(std::string("stages: no partition fits the device memory (") + e.what() +
                    "); the fastest one regardless");
    options.memory_limit_bytes = -1;
    return search_partition(profile, cluster, options);
  }
}

// The stage ranges from `stages`, or a balanced default; records and notes
// the partition whenever the model chose it.
std::vector<LayerRange> resolve_ranges(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                                       const std::vector<int64_t>& replicas, PartitionObjective objective,
                                       std::vector<std::string>& notes) {
  const int64_t layers = layer_count(profile);
  int64_t stages = 0;
  if (config.has("stages")) {
    const nlohmann::json raw = *config.get_json("stages");
    if (!raw.is_number_integer()) {
      std::vector<LayerRange> ranges = config.get_ranges("stages", layers);
      check_stage_count(static_cast<int64_t>(ranges.size()), profile, cluster, "--set stages");
      return ranges;
    }
    stages = raw.get<int64_t>();
    check_stage_count(stages, profile, cluster, "--set stages");
    check_partition_work(stages, profile, "--set stages");
  } else if (!replicas.empty()) {
    stages = static_cast<int64_t>(replicas.size());
    check_stage_count(stages, profile, cluster, "--set replicas");
    check_partition_work(stages, profile, "--set replicas");
  } else {
    stages = std::min(device_count(cluster), layers);
    if (stages < device_count(cluster)) {
      notes.push_back("stages: " + std::to_string(device_count(cluster)) + " devices but only " +
                      std::to_string(layers) + " layers, so " + std::to_string(stages) + " stages");
    }
    const int64_t most = std::max<int64_t>(1, kMaxPartitionCells / std::max<int64_t>(1, layers));
    if (stages > most) {
      notes.push_back("stages: " + std::to_string(most) + " of " + std::to_string(stages) +
                      " possible, the most the partition search places over " + std::to_string(layers) +
                      " layers (stages x layers <= " + std::to_string(kMaxPartitionCells) + "); set stages to the ranges in full for more");
      stages = most;
    }
  }
  const bool replicas_fit = static_cast<int64_t>(replicas.size()) == stages;
  if (replicas.empty()) {
    // The PipeDream DP (sim/search/partition.hpp) with K stages of one device:
    // slowest stage (with its update) or boundary transfer as small as possible.
    PartitionOptions options;
    options.objective = objective;
    options.stages = stages;
    options.replicate = false;
    std::vector<LayerRange> ranges;
    for (const PartitionStage& s : search_default_partition(profile, cluster, options, notes).stages) {
      ranges.push_back(s.layers);
    }
    config.record("stages", ranges_to_json(ranges));
    notes.push_back(std::string("stages: ") + (config.has("stages") ? "" : "default ") + "partition " +
                    describe(ranges) + " (" + std::to_string(stages) +
                    " stages, PipeDream's dynamic program minimising the slowest stage or boundary)");
    return ranges;
  }
  std::vector<LayerRange> ranges =
      balanced_partition(profile, stages, replicas_fit ? replicas : std::vector<int64_t>{});
  config.record("stages", ranges_to_json(ranges));
  notes.push_back(std::string("stages: ") + (config.has("stages") ? "" : "default ") + "balanced partition " +
                  describe(ranges) + " (" + std::to_string(stages) +
                  " stages, minimising the largest per-stage forward + backward time" +
                  (replicas.empty() ? "" : " per replica") + ")");
  return ranges;
}

std::vector<int64_t> read_queue_lengths(const nlohmann::json& queues, const char* key, int64_t blocks) {
  const std::string where = std::string("--set queues: ") + key;
  const std::string expected = std::to_string(blocks) + " integers >= 0, one per block";
  if (!queues.contains(key) || !queues[key].is_array() || static_cast<int64_t>(queues[key].size()) != blocks) {
    throw InputError(where, queues.contains(key) ? "is " + queues[key].dump() : "is missing", expected);
  }
  std::vector<int64_t> lengths;
  for (const auto& x : queues[key]) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0) throw InputError(where, "has " + x.dump(), expected);
    lengths.push_back(x.get<int64_t>());
  }
  return lengths;
}

// Checks a user's queues against §3.2's ordering and derives q. The stale
// timestamps t_0 < ... < t_{K-1} <= t_K < ... < t_{2K-1} give
// Δt_k >= Δt_{k+1} + 2; a batch leaving block k waits through P_k (p_k), one
// step to cross, the blocks above (m_{k+1}) and Q_k (q_k) before its backward
// on block k: m_k = p_k + 1 + m_{k+1} + q_k [reconstructed; it reproduces the
// paper's six settings, e.g. DSP(3,3,0;10,5,0) with q = 1,1].
void derive_gradient_queues(DspQueues& queues) {
  const int64_t blocks = static_cast<int64_t>(queues.m.size());
  if (queues.p[blocks - 1] != 0) {
    throw InputError("--set queues: p", "ends with " + std::to_string(queues.p[blocks - 1]),
                     "0 for the last block, whose output feeds the loss at once");
  }
  queues.q.assign(static_cast<size_t>(blocks), 0);
  for (int64_t k = 0; k + 1 < blocks; ++k) {
    const int64_t q = queues.m[k] - queues.m[k + 1] - queues.p[k] - 1;
    if (queues.m[k] < queues.m[k + 1] + 2 || q < 0) {
      throw InputError("--set queues: m", "m[" + std::to_string(k) + "] = " + std::to_string(queues.m[k]),
                       "m[k] >= m[k+1] + max(2, p[k] + 1) = " +
                           std::to_string(queues.m[k + 1] + std::max<int64_t>(2, queues.p[k] + 1)));
    }
    queues.q[k] = q;
  }
}

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

// docs/equations.md §4: W^m = 2(m-1)·Σw / B.
double weight_sync_s(int64_t replicas, double param_bytes, const LinkSpec& link) {
  return 2.0 * static_cast<double>(replicas - 1) * param_bytes / link.bandwidth_bytes_per_s;
}

// docs/equations.md §4: T(i→j, m) = (1/m)·max(Σ T_l, W^m).
double replicated_stage_s(double compute_s, int64_t replicas, double sync_s) {
  return std::max(compute_s, sync_s) / static_cast<double>(replicas);
}

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

// The partition search over every device with replication (PipeDream's
// optimizer), recorded as `stages` and `replicas`.
Pipeline searched_pipeline(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                           PartitionObjective objective, std::vector<std::string>& notes) {
  PartitionOptions options;
  options.objective = objective;
  options.replicate = true;
  std::vector<LayerRange> ranges;
  std::vector<int64_t> replicas;
  for (const PartitionStage& s : search_default_partition(profile, cluster, options, notes).stages) {
    ranges.push_back(s.layers);
    replicas.push_back(s.replicas);
  }
  config.record("stages", ranges_to_json(ranges));
  config.record("replicas", replicas);
  std::vector<std::string> counts;
  for (int64_t r : replicas) counts.push_back(std::to_string(r));
  notes.push_back("stages: default partition " + describe(ranges) + " with replicas " + join(counts, ",") +
                  " (PipeDream's dynamic program with replication over " + std::to_string(device_count(cluster)) +
                  " devices)");
  return build_pipeline(profile, cluster, ranges, replicas);
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

Pipeline resolve_pipeline(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                          std::vector<std::string>& notes, const PartitionDefaults& defaults, bool read_replicas) {
  std::vector<int64_t> replicas = read_replicas ? config.get_int_list("replicas") : std::vector<int64_t>{};
  for (int64_t r : replicas) {
    if (r < 1) throw InputError("--set replicas", "has " + std::to_string(r), "replica counts >= 1");
  }
  if (read_replicas) {
    const bool given = config.has("replicate");
    const bool replicate = config.get_bool("replicate", defaults.replicate);
    // replicate=true beside both stages and replicas is what a search
    // resolved (a run's config set again): the partition is taken as given.
    const bool partition_given = config.has("stages") || !replicas.empty();
    if (replicate && partition_given) {
      if (given && !(config.has("stages") && !replicas.empty())) {
        throw InputError("--set replicate", "true beside only one of stages and replicas",
                         "replicate=true with no partition (the search chooses it) or with both");
      }
    } else if (replicate) {
      return searched_pipeline(profile, cluster, config, defaults.objective, notes);
    }
  }
  const std::vector<LayerRange> ranges = resolve_ranges(profile, cluster, config, replicas, defaults.objective, notes);
  const int64_t stages = static_cast<int64_t>(ranges.size());
  if (replicas.empty()) {
    replicas.assign(static_cast<size_t>(stages), 1);
    if (read_replicas) config.record("replicas", replicas);
  }
  check_replicas(replicas, stages, cluster);
  return build_pipeline(profile, cluster, ranges, replicas);
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

int64_t resolve_microbatches(StrategyConfig& config, int64_t stages, int64_t batch_size,
                             std::vector<std::string>& notes) {
  if (config.has("microbatches")) {
    const int64_t m = config.get_int("microbatches", 1, 1);
    if (m > batch_size) {
      throw InputError("--set microbatches", std::to_string(m) + " micro-batches",
                       "at most the " + std::to_string(batch_size) + " samples of a mini-batch");
    }
    return m;
  }
  const int64_t m = std::min(4 * stages, batch_size);
  config.get_int("microbatches", m, 1);
  notes.push_back("microbatches: " + std::to_string(m) +
                  (m == 4 * stages ? " = 4·stages (GPipe: M >= 4K keeps the bubble small)"
                                   : " = the batch size (4·stages would leave micro-batches without samples)"));
  return m;
}

// Default: each block's staleness the least a forward and a backward per step
// allow, as DSP(1,1,0;4,2,0) for K = 3 in the paper's Tables 1-2.
DspQueues resolve_dsp_queues(StrategyConfig& config, int64_t blocks, std::vector<std::string>& notes) {
  DspQueues queues;
  if (std::optional<nlohmann::json> raw = config.get_json("queues")) {
    if (!raw->is_object()) throw InputError("--set queues", "is " + echo_json(*raw), "{\"p\": [...], \"m\": [...]}");
    for (const auto& [key, value] : raw->items()) {
      if (key != "p" && key != "m") throw InputError("--set queues", "has key '" + key + "'", "only p and m");
    }
    queues.p = read_queue_lengths(*raw, "p", blocks);
    queues.m = read_queue_lengths(*raw, "m", blocks);
  } else {
    for (int64_t k = 0; k < blocks; ++k) {
      queues.p.push_back(k + 1 < blocks ? 1 : 0);
      queues.m.push_back(2 * (blocks - 1 - k));
    }
    notes.push_back("queues: the paper's smallest setting DSP(1,...,1,0; 2(K-1),...,2,0)");
  }
  derive_gradient_queues(queues);
  config.record("queues", {{"p", queues.p}, {"m", queues.m}});
  return queues;
}

}  // namespace trainsim
