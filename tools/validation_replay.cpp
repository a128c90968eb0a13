// The replay of a recorded validation (validation_replay.hpp).
#include "tools/validation_replay.hpp"

#include <algorithm>
#include <cmath>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/units.hpp"
#include "profiles/profiler/timing.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/validation.hpp"

namespace trainsim {
namespace {

// The median |error| over the strategies that ran; NaN where none did.
double median_abs_error(const std::vector<ReplayedStrategy>& replayed, double ReplayedStrategy::*predicted) {
  std::vector<double> errors;
  for (const ReplayedStrategy& r : replayed) {
    if (r.skipped.empty()) errors.push_back(std::abs(relative_error(r.*predicted, r.measured_s)));
  }
  return errors.empty() ? std::nan("") : median_s(errors);
}

}  // namespace

std::vector<ReplayedStrategy> replay_validation(const nlohmann::json& recorded, const std::string& where,
                                                const Profile& profile, const Cluster& cluster) {
  require_format(recorded, "validation", where);  // trainsim validate --json's output
  const std::string model = require_string(recorded, "model", where);
  const int64_t batch = require_integer(recorded, "batch_size", where, 1);
  if (profile.model != model || profile.batch_size != batch) {
    throw InputError("--profile", "is " + profile.model + " at batch " + std::to_string(profile.batch_size),
                     "a profile of the validation's " + model + " at batch " + std::to_string(batch));
  }
  const int64_t iterations = require_integer(recorded, "iterations", where, 1);
  if (iterations > kMaxPlanIterations) {
    throw InputError(where + ".iterations", "is " + std::to_string(iterations),
                     "at most " + std::to_string(kMaxPlanIterations) + ", as validate runs");
  }
  const nlohmann::json& results = require_field(recorded, "results", where);
  if (!results.is_array()) throw InputError(where + ".results", "is not a list", "one entry per strategy");
  std::vector<ReplayedStrategy> out;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string at = where + ".results[" + std::to_string(i) + "]";
    const nlohmann::json& result = results[i];
    ReplayedStrategy r;
    r.strategy = require_string(result, "strategy", at);
    if (result.contains("skipped")) {
      r.skipped = require_string(result, "skipped", at);
      out.push_back(r);
      continue;
    }
    const StrategyInfo& strategy = find_strategy(r.strategy.substr(0, r.strategy.find(':')), at + ".strategy");
    const StrategyConfig config = StrategyConfig::from_resolved(require_field(result, "config", at), at + ".config");
    r.measured_s = require_nonnegative(result, "measured_s", at);
    r.recorded_simulated_s = require_nonnegative(result, "predicted_simulated_s", at);
    r.recorded_analytic_s = require_nonnegative(result, "predicted_analytic_s", at);
    const PricedPlan priced = price_plan(strategy, profile, cluster, config, static_cast<int32_t>(iterations));
    r.simulated_s = priced.simulated.iteration_s;
    r.analytic_s = priced.analytic.iteration_s;
    out.push_back(r);
  }
  return out;
}

nlohmann::json replay_to_json(const std::vector<ReplayedStrategy>& replayed, const std::string& validation,
                              const Profile& profile, const Cluster& cluster) {
  nlohmann::json results = nlohmann::json::array();
  for (const ReplayedStrategy& r : replayed) {
    if (!r.skipped.empty()) {
      results.push_back({{"strategy", r.strategy}, {"skipped", r.skipped}});
      continue;
    }
    results.push_back({{"strategy", r.strategy},
                       {"measured_s", r.measured_s},
                       {"recorded_simulated_s", r.recorded_simulated_s},
                       {"recorded_analytic_s", r.recorded_analytic_s},
                       {"predicted_simulated_s", r.simulated_s},
                       {"predicted_analytic_s", r.analytic_s},
                       {"error_simulated", relative_error(r.simulated_s, r.measured_s)},
                       {"error_analytic", relative_error(r.analytic_s, r.measured_s)}});
  }
  const auto or_null = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"format", "trainsim.validation_replay/1"},
          {"validation", validation},
          {"model", profile.model},
          {"batch_size", profile.batch_size},
          {"cluster", cluster.name},
          {"median_abs_error_simulated", or_null(median_abs_error(replayed, &ReplayedStrategy::simulated_s))},
          {"median_abs_error_analytic", or_null(median_abs_error(replayed, &ReplayedStrategy::analytic_s))},
          {"recorded_median_abs_error_simulated",
           or_null(median_abs_error(replayed, &ReplayedStrategy::recorded_simulated_s))},
          {"recorded_median_abs_error_analytic",
           or_null(median_abs_error(replayed, &ReplayedStrategy::recorded_analytic_s))},
          {"results", std::move(results)}};
}

void add_replay_options(CLI::App& validate, ReplayOptions& o) {
  validate.add_option("--replay", o.replay,
                      "Run nothing: price the strategies of this validation (its --json) again from --profile and "
                      "--cluster, against its measurements");
  validate.add_option("--profile", o.profile,
                      "With --replay: the profile to price from (a validation's --profile-out)");
  validate.add_option("--cluster", o.cluster, "With --replay: the cluster to price on (a validation's --cluster-out)");
}

void note_run_options(const CLI::App& validate, ReplayOptions& o) {
  for (const CLI::Option* option : validate.get_options()) {
    // Named by its long name, which hidden options have too (get_name gives them none).
    const std::string flag = option->get_lnames().empty() ? option->get_name() : "--" + option->get_lnames().front();
    const bool read = flag == "--replay" || flag == "--profile" || flag == "--cluster" || flag == "--json" ||
                      flag == "--quiet" || flag == "--help";
    if (option->count() > 0 && !read) o.run_options.push_back(flag);
  }
}

bool replays(const ReplayOptions& o, const std::string& json, bool quiet, CommandContext& ctx) {
  if (o.replay.empty()) {
    if (!o.profile.empty() || !o.cluster.empty()) {
      throw InputError(o.profile.empty() ? "--cluster" : "--profile", "given without --replay",
                       "--replay FILE, a validation to price again (a validation that runs measures both)");
    }
    return false;
  }
  if (!o.run_options.empty()) {
    throw InputError(o.run_options.front(), "given with --replay, which runs nothing",
                     "--replay with --profile, --cluster, --json and --quiet alone");
  }
  if (o.profile.empty() || o.cluster.empty()) {
    throw InputError(o.profile.empty() ? "--profile" : "--cluster", "is missing with --replay",
                     "the profile and the cluster to price the validation from (its --profile-out and --cluster-out)");
  }
  const std::string& path = o.replay;
  const std::string& profile_path = o.profile;
  const std::string& cluster_path = o.cluster;
  const Cluster cluster = load_cluster(cluster_path, "--cluster");
  const Profile profile = read_profile_file(profile_path);
  const std::vector<ReplayedStrategy> replayed = replay_validation(read_json_file(path), path, profile, cluster);
  if (!json.empty()) {
    write_text_output(json, replay_to_json(replayed, path, profile, cluster).dump(2) + "\n", ctx.out, "--json");
  }
  if (quiet || json == "-") return true;
  ctx.out << path << " (" << profile.model << ", batch " << profile.batch_size << " per device) priced again from "
          << profile_path << " and " << cluster_path << "; error = (predicted - measured) / measured\n";
  TextTable t;
  t.header = {"strategy", "measured", "simulated", "error", "recorded", "analytic", "error", "recorded"};
  t.right_aligned = {false, true, true, true, true, true, true, true};
  for (const ReplayedStrategy& r : replayed) {
    if (!r.skipped.empty()) continue;
    t.rows.push_back({r.strategy, format_seconds(r.measured_s), format_seconds(r.simulated_s),
                      error_percent(relative_error(r.simulated_s, r.measured_s)),
                      error_percent(relative_error(r.recorded_simulated_s, r.measured_s)), format_seconds(r.analytic_s),
                      error_percent(relative_error(r.analytic_s, r.measured_s)),
                      error_percent(relative_error(r.recorded_analytic_s, r.measured_s))});
  }
  print_aligned(ctx.out, t);
  const auto median = [&](double ReplayedStrategy::*predicted) {
    return error_percent(median_abs_error(replayed, predicted), false);
  };
  ctx.out << "median |error|: simulated " << median(&ReplayedStrategy::simulated_s) << " (recorded "
          << median(&ReplayedStrategy::recorded_simulated_s) << "), analytic " << median(&ReplayedStrategy::analytic_s)
          << " (recorded " << median(&ReplayedStrategy::recorded_analytic_s) << ")\n";
  for (const ReplayedStrategy& r : replayed) {
    if (!r.skipped.empty()) ctx.out << r.strategy << ": not run: " << r.skipped << "\n";
  }
  return true;
}

}  // namespace trainsim
