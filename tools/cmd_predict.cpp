// `trainsim predict`: every strategy's predicted speed on one model and
// cluster, as an aligned table, JSON or CSV.
#include <algorithm>
#include <memory>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "profiles/workload_export.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/llm_commands.hpp"

namespace trainsim {
namespace {

struct PredictOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string strategies = "all";
  std::string method = "analytic";
  std::vector<std::string> settings;
  std::string config;
  std::string json;
  std::string csv;
  int32_t iterations = 20;
  std::string straggler;
  double jitter = 0;
  uint64_t seed = 1;
  bool quiet = false;
  int64_t gpus = 0, global_batch = 0;  // a transformer's job
  std::string workload_out, workload_format = "astra-sim";
};

// --config FILE: a JSON object of settings, keys as for --set.
void read_config_settings(const std::string& path, std::vector<Setting>& settings) {
  const nlohmann::json doc = read_json_file(path);
  if (!doc.is_object()) throw InputError(path, "is not a JSON object", "{\"key\": value, ...}");
  for (const auto& [key, value] : doc.items()) {
    if (key == "format") continue;
    settings.push_back({key, value.is_string() ? value.get<std::string>() : value.dump(), path + ": " + key});
  }
}

void print_predictions(std::ostream& out, const PredictionSet& set, const Profile& profile, const Cluster& c) {
  out << set.model << ", batch " << set.batch_size << " per device (" << profile.source << " profile on "
      << profile.device.name << ") on " << c.name << ": " << c.machines << " x " << c.devices_per_machine << " "
      << c.device.name << "\n\n";
  print_aligned(out, prediction_table(set));
  // Notes once each, after the strategies that have it; a long one (a
  // partition of many stages) is cut, as the JSON output has it whole.
  constexpr size_t kNoteWidth = 160;
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;  // note -> strategies, in order
  for (const Prediction& p : set.results) {
    for (const std::string& note : p.notes) {
      auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == note; });
      if (it == notes.end()) it = notes.insert(notes.end(), {note, {}});
      if (std::find(it->second.begin(), it->second.end(), p.strategy) == it->second.end()) {
        it->second.push_back(p.strategy);
      }
    }
  }
  if (!notes.empty()) out << "\nnotes (--json has them whole):\n";
  for (const auto& [note, strategies] : notes) {
    std::string line = join(strategies, ", ") + ": " + note;
    if (line.size() > kNoteWidth) {
      size_t cut = kNoteWidth - 3;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 char
      line = line.substr(0, cut) + "...";
    }
    out << "  " << line << "\n";
  }
}

void run_predict(const PredictOptions& o, CommandContext& ctx) {
  if (is_transformer_config(o.model)) {
    if (!o.settings.empty() || !o.config.empty()) {
      throw InputError(o.settings.empty() ? "--config" : "--set", "with a transformer --model",
                       "none: each strategy's fastest configuration is searched (trainsim llm prices a given one)");
    }
    if (!o.csv.empty()) throw InputError("--csv", "with a transformer --model", "--json");
    return run_transformer_predict(
        {o.model, o.cluster, o.strategies, o.method, o.json, o.gpus, o.global_batch, o.quiet}, ctx);
  }
  refuse_job_size_without_transformer(o.gpus, o.global_batch);
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Profile profile = resolve_profile_input(o.profile, o.model, o.batch, cluster);
  if (!o.workload_out.empty()) {
    const WorkloadFormat format = parse_workload_format(o.workload_format, "--workload-format");
    write_text_output(o.workload_out, workload_text(profile, device_count(cluster), format), ctx.out, "--workload-out");
  }
  std::vector<Setting> settings;
  if (!o.config.empty()) read_config_settings(o.config, settings);
  for (const std::string& text : o.settings) settings.push_back(parse_setting(text, "--set"));
  const std::vector<std::string> ids = parse_strategy_list(o.strategies, "--strategies");
  const SimOptions options = parse_sim_options(o.straggler, o.jitter, o.seed);
  const PredictionSet set = o.method == "analytic"    ? predict_analytic(profile, cluster, ids, settings)
                            : o.method == "simulated" ? predict_simulated(profile, cluster, ids, settings,
                                                                          o.iterations, options)
                                                      : predict_both(profile, cluster, ids, settings, o.iterations,
                                                                     options);

  if (!o.json.empty()) write_text_output(o.json, prediction_set_to_json(set).dump(2) + "\n", ctx.out, "--json");
  if (!o.csv.empty()) {
    std::ostringstream csv;
    print_csv(csv, prediction_csv_table(set));
    write_text_output(o.csv, csv.str(), ctx.out, "--csv");
  }
  if (!o.quiet && o.json != "-" && o.csv != "-") print_predictions(ctx.out, set, profile, cluster);
}

}  // namespace

void add_predict_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "Predict every strategy's speed for a model on a cluster");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON)");
  cmd->add_option("--model", o->model,
                  "Zoo model id or model JSON file, profiled analytically on the cluster; or a transformer "
                  "configuration (trainsim llm --list) on --cluster dgx-a100 or dgx-h100");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--strategies", o->strategies, "'all' or strategy ids separated by commas")
      ->capture_default_str();
  cmd->add_option("--method", o->method, "analytic (closed forms), simulated (discrete-event) or both")
      ->check(CLI::IsMember({"analytic", "simulated", "both"}))
      ->capture_default_str();
  cmd->add_option("--iterations", o->iterations, "Mini-batches each simulated plan trains (at most 100000)")
      ->check(CLI::PositiveNumber)  // at most kMaxPlanIterations: generate_plan says so
      ->capture_default_str();
  cmd->add_option("--straggler", o->straggler, "Simulated stragglers PROB:SLOWDOWN, e.g. 0.33:1.5");
  cmd->add_option("--jitter", o->jitter, "Simulated relative standard deviation of compute times")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--seed", o->seed, "Seed of the simulated slowdowns")->check(seed_check())->capture_default_str();
  cmd->add_option("--set", o->settings, "Strategy setting key=value (repeatable; id.key for one strategy)");
  cmd->add_option("--config", o->config, "JSON object of settings, keys as for --set");
  cmd->add_option("--json", o->json, "Write the trainsim.prediction/1 JSON here ('-' for standard output)");
  cmd->add_option("--csv", o->csv, "Write a CSV row per strategy here ('-' for standard output)");
  cmd->add_flag("--quiet", o->quiet, "Print no table");
  add_job_size_options(cmd, o->gpus, o->global_batch);
  cmd->add_option("--workload-out", o->workload_out,
                  "Also write the profile's data-parallel training over the cluster's devices as ASTRA-sim 1.0's "
                  "or SimAI's workload text");
  cmd->add_option("--workload-format", o->workload_format, "astra-sim or simai")->capture_default_str();
  std::string footer = "\nStrategies and the settings each reads:\n";
  for (const StrategyInfo& s : strategy_registry()) {
    footer += "  " + s.id + std::string(16 - std::min<size_t>(15, s.id.size()), ' ') + s.summary;
    footer += s.keys.empty() ? "\n" : " [" + join(s.keys, ", ") + "]\n";
  }
  footer += "\nA transformer's ways of spreading it (each at its fastest configuration that fits):\n  " +
            join(transformer_families(), ", ") + "\n";
  footer +=
      "\nExamples:\n  trainsim predict --model vgg16 --batch 128 --cluster p40x4-pcie3 \\\n"
      "      --strategies dp-ring,gpipe --set gpipe.microbatches=16 --json out.json\n"
      "  trainsim predict --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --method both\n";
  cmd->footer(footer);
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_predict(*o, ctx); }; });
}

}  // namespace trainsim
