// A pipeline strategy's stages from its settings; see pipeline_settings.hpp.
#include "sim/cost/pipeline_settings.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"

namespace trainsim {

const PartitionDefaults kPipedreamPartition{PartitionObjective::kOneFOneB, true};
const PartitionDefaults kPipedreamSyncPartition{PartitionObjective::kOneFOneB, false};
const PartitionDefaults kDualpipePartition{PartitionObjective::kDualPipe, false};
const PartitionDefaults kGpipePartition{PartitionObjective::kGPipe, false};
const PartitionDefaults kDspPartition{PartitionObjective::kDsp, false};

namespace {

int64_t layer_count(const Profile& profile) { return static_cast<int64_t>(profile.layers.size()); }

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

}  // namespace

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

Pipeline resolve_interleaved_pipeline(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                                      std::vector<std::string>& notes, int64_t chunks) {
  if (config.has("replicas") || config.get_bool("replicate", false)) {
    throw InputError(config.has("replicas") ? "--set replicas" : "--set replicate",
                     "beside chunks=" + std::to_string(chunks),
                     "one device a stage: interleaved chunks are not replicated");
  }
  const auto layers = static_cast<int64_t>(profile.layers.size());
  const int64_t most = std::min(device_count(cluster), layers / chunks);
  if (most < 1) {
    throw InputError("--set chunks", std::to_string(chunks) + " for " + std::to_string(layers) + " layers",
                     "at most one chunk a layer");
  }
  const int64_t devices = config.get_int("stages", most, 1);
  if (devices > most) {
    throw InputError("--set stages", std::to_string(devices) + " devices of " + std::to_string(chunks) + " chunks",
                     "at most " + std::to_string(most) + " (the cluster's devices, and one layer a chunk)");
  }
  const int64_t virtual_stages = devices * chunks;
  Cluster one_machine = cluster;  // the sums per chunk; the links are set below
  one_machine.machines = 1;
  one_machine.devices_per_machine = virtual_stages;
  Pipeline pipe = build_pipeline(profile, one_machine, balanced_partition(profile, virtual_stages),
                                 std::vector<int64_t>(static_cast<size_t>(virtual_stages), 1));
  for (int64_t s = 0; s < virtual_stages; ++s) pipe.stages[static_cast<size_t>(s)].first_device = s % devices;
  for (int64_t j = 0; j + 1 < virtual_stages; ++j) {
    StageBoundary& b = pipe.boundaries[static_cast<size_t>(j)];
    const int64_t from = j % devices, to = (j + 1) % devices;
    b.link = link_spanning(std::min(from, to), std::max(from, to), cluster);
    b.comm_s = 2 * transfer_s(b.bytes, b.link);
  }
  pipe.devices = devices;
  config.record("replicas", std::vector<int64_t>(static_cast<size_t>(devices), 1));
  notes.push_back("chunks: " + std::to_string(chunks) + " model chunks on each of " + std::to_string(devices) +
                  " devices, " + std::to_string(virtual_stages) + " balanced virtual stages (interleaved 1F1B)");
  return pipe;
}

void check_interleaved_microbatches(int64_t chunks, int64_t microbatches, int64_t devices) {
  if (chunks > 1 && microbatches % devices != 0) {
    throw InputError(
        "--set microbatches",
        std::to_string(microbatches) + " with " + std::to_string(chunks) + " chunks on " + std::to_string(devices) +
            " devices",
        "a multiple of the devices (interleaved 1F1B runs them in groups of " + std::to_string(devices) + ")");
  }
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

double resolve_weight_share(StrategyConfig& config) {
  const double share = config.get_number("weight_share", 0.5, 0);
  if (!(share > 0 && share < 1)) {
    throw InputError("--set weight_share", "is " + format_number(share),
                     "the share of each backward that is the weight gradients, above 0 and below 1");
  }
  return share;
}

}  // namespace trainsim
