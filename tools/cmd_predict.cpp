// `trainsim predict`: every strategy's predicted speed on one model and
// cluster, as an aligned table, JSON or CSV.
#include <algorithm>
#include <memory>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/units.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "model/strings.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/commands.hpp"

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
  bool quiet = false;
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

Profile resolve_profile(const PredictOptions& o, const Cluster& cluster) {
  if (!o.profile.empty() && !o.model.empty()) {
    throw InputError("--profile", "given with --model", "either --profile FILE or --model M [--batch B]");
  }
  if (!o.profile.empty()) {
    if (o.batch > 0) throw InputError("--batch", "given with --profile", "the profile's own batch size");
    return read_profile_file(o.profile);
  }
  if (o.model.empty()) throw InputError("predict", "no model given", "--profile FILE or --model M [--batch B]");
  const Model model = load_model(o.model, "--model");
  return analytic_profile(model, o.batch > 0 ? o.batch : model.default_batch, cluster);
}

void print_predictions(std::ostream& out, const PredictionSet& set, const Profile& profile, const Cluster& c) {
  out << set.model << ", batch " << set.batch_size << " per device (" << profile.source << " profile on "
      << profile.device.name << ") on " << c.name << ": " << c.machines << " x " << c.devices_per_machine << " "
      << c.device.name << "\n\n";
  print_aligned(out, prediction_table(set));
  bool header = false;
  for (const Prediction& p : set.results) {
    for (const std::string& note : p.notes) {
      if (!header) out << "\nnotes:\n";
      header = true;
      out << "  " << p.strategy << ": " << note << "\n";
    }
  }
}

void run_predict(const PredictOptions& o, CommandContext& ctx) {
  if (o.method != "analytic") {
    throw InputError("--method", "'" + o.method + "' is not available yet", "analytic");
  }
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Profile profile = resolve_profile(o, cluster);
  std::vector<Setting> settings;
  if (!o.config.empty()) read_config_settings(o.config, settings);
  for (const std::string& text : o.settings) settings.push_back(parse_setting(text, "--set"));
  const std::vector<std::string> ids = parse_strategy_list(o.strategies, "--strategies");
  const PredictionSet set = predict_analytic(profile, cluster, ids, settings);

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
  cmd->add_option("--model", o->model, "Zoo model id or model JSON file; profiled analytically on the cluster");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--strategies", o->strategies, "'all' or strategy ids separated by commas")
      ->capture_default_str();
  cmd->add_option("--method", o->method, "analytic (closed forms)")->capture_default_str();
  cmd->add_option("--set", o->settings, "Strategy setting key=value (repeatable; id.key for one strategy)");
  cmd->add_option("--config", o->config, "JSON object of settings, keys as for --set");
  cmd->add_option("--json", o->json, "Write the trainsim.prediction/1 JSON here ('-' for standard output)");
  cmd->add_option("--csv", o->csv, "Write a CSV row per strategy here ('-' for standard output)");
  cmd->add_flag("--quiet", o->quiet, "Print no table");
  std::string footer = "\nStrategies and the settings each reads:\n";
  for (const StrategyInfo& s : strategy_registry()) {
    footer += "  " + s.id + std::string(16 - std::min<size_t>(15, s.id.size()), ' ') + s.summary;
    footer += s.keys.empty() ? "\n" : " [" + join(s.keys, ", ") + "]\n";
  }
  footer += "\nExample:\n  trainsim predict --model vgg16 --batch 128 --cluster p40x4-pcie3 \\\n"
            "      --strategies dp-ring,gpipe --set gpipe.microbatches=16 --json out.json\n";
  cmd->footer(footer);
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_predict(*o, ctx); }; });
}

}  // namespace trainsim
