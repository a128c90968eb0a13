// `trainsim partition`: the best pipeline partitions of a model for one
// schedule (sim/search/partition.hpp), the few best re-ranked by the
// discrete-event simulator, printed as a stages table and optionally JSON.
#include <algorithm>
#include <stdexcept>
#include <memory>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/search/partition.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

constexpr size_t kCandidates = 5;       // partitions re-ranked by the simulator
constexpr int32_t kSimIterations = 20;  // mini-batches each candidate's plan trains

struct PartitionCommandOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string schedule;
  int64_t stages = 0;
  bool replicate = false;
  std::string memory_limit;  // empty = the device's memory, "none", or a byte count
  int64_t workers = 0;       // 0 = every device
  bool flat = false;         // no hierarchical search on several machines
  std::string evaluate;      // fixed stages "0-3,4-9" to cost instead of searching
  std::string json;
};

struct Candidate {
  Partition partition;
  double iteration_s = 0;  // simulated
};

bool same_partition(const Partition& a, const Partition& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t k = 0; k < a.stages.size(); ++k) {
    if (a.stages[k].layers != b.stages[k].layers || a.stages[k].replicas != b.stages[k].replicas) return false;
  }
  return true;
}

// The search's optimum and optima of neighbouring settings (without
// replication when it was allowed, straight with one stage per worker and with half as many),
// best objective first; one straight candidate when --stages is given.
std::vector<Candidate> candidates(const Profile& profile, const Cluster& cluster, const PartitionOptions& base) {
  std::vector<PartitionOptions> settings{base};
  if (base.stages == 0) {
    const int64_t workers = base.workers > 0 ? base.workers : device_count(cluster);
    const int64_t most = std::min<int64_t>(workers, static_cast<int64_t>(profile.layers.size()));
    PartitionOptions o = base;
    if (base.replicate) {
      o.replicate = false;
      settings.push_back(o);
    }
    for (int64_t k : {most, most / 2, most / 4}) {
      if (k < 1) continue;
      o = base;
      o.stages = k;
      settings.push_back(o);
    }
  }
  std::vector<Candidate> found;
  for (const PartitionOptions& o : settings) {
    Candidate c;
    try {
      c.partition = search_partition(profile, cluster, o);
    } catch (const InputError&) {
      // A neighbouring setting may not fit the memory limit; the requested one must.
      if (&o == &settings.front()) throw;
      continue;
    }
    const bool seen = std::any_of(found.begin(), found.end(),
                                  [&](const Candidate& f) { return same_partition(f.partition, c.partition); });
    if (!seen) found.push_back(c);
  }
  std::stable_sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.partition.bottleneck_s < b.partition.bottleneck_s;
  });
  if (found.size() > kCandidates) found.resize(kCandidates);
  return found;
}

// generate_plan + simulate_plan of the schedule's strategy on this partition.
double simulate_s(const std::string& strategy_id, const Profile& profile, const Cluster& cluster, const Partition& p) {
  nlohmann::json ranges = nlohmann::json::array(), replicas = nlohmann::json::array();
  for (const PartitionStage& s : p.stages) {
    ranges.push_back({s.layers.first, s.layers.last});
    replicas.push_back(s.replicas);
  }
  StrategyConfig config;
  config.set_json("stages", ranges, "trainsim partition");
  if (strategy_id != "dsp") config.set_json("replicas", replicas, "trainsim partition");
  const Plan plan = generate_plan(find_strategy(strategy_id, "--schedule"), profile, cluster, config, kSimIterations);
  return simulate_plan(plan, cluster, SimOptions{}).iteration_s;
}

TextTable stages_table(const Partition& p) {
  TextTable t;
  t.header = {"stage", "layers", "replicas", "time", "memory"};
  t.right_aligned = {true, true, true, true, true};
  if (p.hierarchical) {
    t.header.push_back("group (machines)");
    t.right_aligned.push_back(true);
  }
  for (size_t k = 0; k < p.stages.size(); ++k) {
    const PartitionStage& s = p.stages[k];
    t.rows.push_back({std::to_string(k), std::to_string(s.layers.first) + "-" + std::to_string(s.layers.last),
                      std::to_string(s.replicas), format_seconds(s.time_s), format_bytes(s.memory_bytes)});
    if (p.hierarchical) {
      t.rows.back().push_back(std::to_string(s.group) + " (" + std::to_string(s.machines) + ")");
    }
  }
  return t;
}

nlohmann::json partition_json(const Candidate& c, const std::string& schedule, const std::string& model,
                              const std::string& cluster) {
  nlohmann::json stages = nlohmann::json::array();
  for (const PartitionStage& s : c.partition.stages) {
    stages.push_back({{"layers", {s.layers.first, s.layers.last}}, {"replicas", s.replicas}, {"time_s", s.time_s},
                      {"memory_bytes", s.memory_bytes}});
    // Hierarchical: the machine-level stage (group) and the machines running it.
    if (c.partition.hierarchical) {
      stages.back()["group"] = s.group;
      stages.back()["machines"] = s.machines;
    }
  }
  return {{"model", model},
          {"cluster", cluster},
          {"schedule", schedule},
          {"stages", std::move(stages)},
          {"hierarchical", c.partition.hierarchical},
          {"bottleneck_s", c.partition.bottleneck_s},
          {"iteration_s", c.iteration_s}};
}

// --evaluate "0-3,4-4,5-9": 0-based inclusive layer ranges.
std::vector<LayerRange> parse_stage_ranges(const std::string& text) {
  std::vector<LayerRange> ranges;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const size_t dash = item.find('-');
    size_t used_first = 0, used_last = 0;
    try {
      if (dash == std::string::npos) throw std::invalid_argument("no dash");
      const LayerRange r{std::stoll(item.substr(0, dash), &used_first), std::stoll(item.substr(dash + 1), &used_last)};
      if (used_first != dash || used_last != item.size() - dash - 1) throw std::invalid_argument("trailing text");
      ranges.push_back(r);
    } catch (const std::exception&) {
      throw InputError("--evaluate", "has '" + item + "'", "comma-separated layer ranges FIRST-LAST such as 0-3,4-9");
    }
    at = comma + 1;
  }
  return ranges;
}

// --memory-limit: absent = 0 (the device's memory), "none" = -1 (no limit),
// else a positive byte count ("16GB", "80GiB").
double parse_memory_limit(const std::string& text) {
  if (text.empty()) return 0;
  if (text == "none") return -1;
  const double bytes = parse_bytes(text, "--memory-limit");
  if (bytes <= 0) throw InputError("--memory-limit", "'" + text + "'", "a positive byte count such as 16GB, or none");
  return bytes;
}

void run_partition(const PartitionCommandOptions& o, CommandContext& ctx) {
  if (!o.evaluate.empty() && o.stages > 0) {
    throw InputError("--stages", "given with --evaluate", "one of them: --evaluate's ranges are the stages");
  }
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Profile profile = resolve_profile_input(o.profile, o.model, o.batch, cluster);
  PartitionOptions options;
  options.objective = parse_partition_objective(o.schedule, "--schedule");
  options.stages = o.stages;
  options.replicate = o.replicate;
  options.memory_limit_bytes = parse_memory_limit(o.memory_limit);
  options.workers = o.workers;
  options.hierarchical = !o.flat;
  std::vector<Candidate> found;
  if (o.evaluate.empty()) {
    found = candidates(profile, cluster, options);
  } else {
    found.push_back({evaluate_partition(profile, cluster, parse_stage_ranges(o.evaluate), options, "--evaluate"), 0});
  }
  for (Candidate& c : found) c.iteration_s = simulate_s(o.schedule, profile, cluster, c.partition);
  std::stable_sort(found.begin(), found.end(),
                   [](const Candidate& a, const Candidate& b) { return a.iteration_s < b.iteration_s; });
  const Candidate& best = found.front();
  if (!o.json.empty()) {
    write_text_output(o.json, partition_json(best, o.schedule, profile.model, cluster.name).dump(2) + "\n", ctx.out,
                      "--json");
    if (o.json == "-") return;
  }
  ctx.out << o.schedule << " partition of " << profile.model << " (" << profile.layers.size() << " layers, batch "
          << profile.batch_size << ") on " << cluster.name << ": " << best.partition.stages.size()
          << " stages, bottleneck " << format_seconds(best.partition.bottleneck_s) << ", simulated iteration "
          << format_seconds(best.iteration_s) << " (best of " << found.size() << " candidates)\n\n";
  print_aligned(ctx.out, stages_table(best.partition));
}

}  // namespace

void add_partition_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<PartitionCommandOptions>();
  CLI::App* cmd = app.add_subcommand("partition", "Search the best pipeline partition for a schedule");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON)");
  cmd->add_option("--model", o->model, "Zoo model id or model JSON file; profiled analytically on the cluster");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--schedule", o->schedule, "pipedream, dualpipe, gpipe or dsp")->required();
  cmd->add_option("--stages", o->stages, "Exactly this many stages, one device each (default: searched)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--replicate", o->replicate, "Let stages be replicated over several devices");
  cmd->add_option("--memory-limit", o->memory_limit,
                  "Per-device memory limit, e.g. 16GB or 80GiB, or none (default: the cluster device's memory)");
  cmd->add_option("--workers", o->workers, "Devices to use (default: every device of the cluster)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--flat", o->flat, "On several machines, search flat (inter link everywhere), not by machine levels");
  cmd->add_option("--evaluate", o->evaluate,
                  "Cost these stages (0-based layer ranges, e.g. 0-3,4-9) with their best replication instead of searching");
  cmd->add_option("--json", o->json, "Write the best partition as JSON here ('-' for standard output)");
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_partition(*o, ctx); }; });
}

}  // namespace trainsim
