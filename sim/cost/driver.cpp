// The predict driver; see driver.hpp.
#include "sim/cost/driver.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "model/error.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"
#include "sim/cost/host_bound.hpp"
#include "sim/cost/shared_devices.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

bool reads_key(const StrategyInfo& strategy, const std::string& key) {
  return std::find(strategy.keys.begin(), strategy.keys.end(), key) != strategy.keys.end();
}

// The settings that reach `strategy`, with "id." prefixes removed.
StrategyConfig config_for(const StrategyInfo& strategy, const std::vector<Setting>& settings) {
  StrategyConfig config;
  for (const Setting& s : settings) {
    const auto dot = s.key.find('.');
    if (dot != std::string::npos) {
      if (s.key.substr(0, dot) == strategy.id) config.set(s.key.substr(dot + 1), s.value, s.where);
    } else if (reads_key(strategy, s.key)) {
      config.set(s.key, s.value, s.where);
    }
  }
  return config;
}

// Every setting must reach at least one selected strategy.
void check_settings_reach(const std::vector<const StrategyInfo*>& selected, const std::vector<Setting>& settings) {
  for (const Setting& s : settings) {
    const auto dot = s.key.find('.');
    bool reached = false;
    std::set<std::string> known;
    for (const StrategyInfo* strategy : selected) {
      known.insert(strategy->keys.begin(), strategy->keys.end());
      if (dot != std::string::npos) {
        reached |= s.key.substr(0, dot) == strategy->id;
      } else {
        reached |= reads_key(*strategy, s.key);
      }
    }
    if (dot != std::string::npos && !reached) {
      find_strategy(s.key.substr(0, dot), s.where);  // names an unknown strategy
      throw InputError(s.where, "names strategy '" + s.key.substr(0, dot) + "', which is not selected",
                       "a strategy listed in --strategies");
    }
    if (!reached) {
      const std::string names = join(std::vector<std::string>(known.begin(), known.end()), ", ");
      throw InputError(s.where, "is not a setting of any selected strategy",
                       names.empty() ? "no settings for these strategies" : "one of " + names);
    }
  }
}

void check_profile_has_work(const Profile& profile, const std::string& where) {
  if (total_forward_s(profile) + total_backward_s(profile) <= 0) {
    throw InputError(where, "every layer's forward_s and backward_s is 0",
                     "a profile with measured or estimated times");
  }
}

}  // namespace

Setting parse_setting(const std::string& text, const std::string& where) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(where, "'" + text + "'", "key=value, e.g. workers=4 or gpipe.microbatches=8");
  }
  return Setting{text.substr(0, eq), text.substr(eq + 1), where + " " + text.substr(0, eq)};
}

std::vector<std::string> parse_strategy_list(const std::string& text, const std::string& where) {
  std::vector<std::string> ids;
  if (text == "all") {
    for (const StrategyInfo& s : strategy_registry()) ids.push_back(s.id);
    return ids;
  }
  std::stringstream stream(text);
  std::string id;
  while (std::getline(stream, id, ',')) {
    if (id.empty()) continue;
    find_strategy(id, where);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  if (ids.empty()) throw InputError(where, "is empty", "all, or strategy ids separated by commas");
  return ids;
}

namespace {

std::vector<const StrategyInfo*> select_strategies(const Profile& profile, const std::vector<std::string>& ids,
                                                   const std::vector<Setting>& settings) {
  check_profile_has_work(profile, "profile " + profile.model);
  std::vector<const StrategyInfo*> selected;
  for (const std::string& id : ids) selected.push_back(&find_strategy(id, "--strategies"));
  if (selected.empty()) {
    for (const StrategyInfo& s : strategy_registry()) selected.push_back(&s);
  }
  check_settings_reach(selected, settings);
  return selected;
}

void add_result(PredictionSet& set, Prediction p, double single_samples_per_s) {
  p.speedup_vs_single = p.samples_per_s / single_samples_per_s;
  const double peak = peak_memory_bytes(p);
  if (peak > set.device_memory_bytes) {
    p.notes.push_back("needs " + format_bytes(peak) + " on a device that has " + format_bytes(set.device_memory_bytes));
  }
  set.results.push_back(std::move(p));
}

Prediction simulate_strategy(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                             const StrategyConfig& config, int32_t iterations, const SimOptions& options) {
  const Plan plan = generate_plan(strategy, profile, cluster, config, iterations);
  Prediction p = prediction_from_simulation(plan, simulate_plan(plan, cluster, options));
  p.staleness = predict_strategy(strategy, profile, cluster, config).staleness;
  return p;
}

// Runs the selected strategies by the analytic models, the simulator, or both.
PredictionSet predict_with(const Profile& profile, const Cluster& cluster, const std::vector<std::string>& ids,
                           const std::vector<Setting>& settings, bool analytic, bool simulated,
                           int32_t iterations, const SimOptions* options) {
  const std::vector<const StrategyInfo*> selected = select_strategies(profile, ids, settings);
  const StrategyInfo& single = find_strategy("single", "--strategies");
  // The baselines: one device, same per-device batch, no settings.
  const double single_analytic = predict_bounded(single, profile, cluster, {}).samples_per_s;
  const double single_simulated =
      simulated ? simulate_strategy(single, profile, cluster, {}, iterations, *options).samples_per_s : 0.0;
  PredictionSet set{profile.model, cluster.name, profile.batch_size, cluster.device.memory_bytes, {}};
  for (const StrategyInfo* strategy : selected) {
    const StrategyConfig config = config_for(*strategy, settings);
    if (analytic) {
      add_result(set, predict_bounded(*strategy, profile, cluster, config), single_analytic);
    }
    if (simulated) {
      add_result(set, simulate_strategy(*strategy, profile, cluster, config, iterations, *options), single_simulated);
    }
  }
  return set;
}

}  // namespace

void price_plan_bounds(const Plan& plan, const Cluster& cluster, Prediction& prediction) {
  price_shared_devices(plan, cluster, prediction);
  price_host_per_op(plan, cluster, prediction);
}

Prediction predict_bounded(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                           const StrategyConfig& config) {
  Prediction p = predict_strategy(strategy, profile, cluster, config);
  if (cluster.shared_devices <= 0 && !prices_host_per_op(cluster)) return p;
  try {
    int32_t planned = kPlanBoundIterations;
    Plan plan = generate_plan(strategy, profile, cluster, config, planned);
    // Whole periods: where workers take iterations in turns (PipeDream's
    // replicated stages), a part period gives some workers one more.
    if (const int32_t period = plan.iteration_period; period > 1 && planned % period != 0) {
      planned += period - planned % period;
      plan = generate_plan(strategy, profile, cluster, config, planned);
    }
    price_plan_bounds(plan, cluster, p);
  } catch (const InputError& e) {
    // Past the plans' limits, which the cost model does not have: its own figure.
    p.notes.push_back(std::string("not bounded by the shared device's work or the host's time per op: its plan "
                                  "was not made (") +
                      e.what() + ")");
  }
  return p;
}

PredictionSet predict_analytic(const Profile& profile, const Cluster& cluster,
                               const std::vector<std::string>& strategy_ids,
                               const std::vector<Setting>& settings) {
  return predict_with(profile, cluster, strategy_ids, settings, true, false, 0, nullptr);
}

PredictionSet predict_simulated(const Profile& profile, const Cluster& cluster,
                                const std::vector<std::string>& strategy_ids, const std::vector<Setting>& settings,
                                int32_t iterations, const SimOptions& options) {
  return predict_with(profile, cluster, strategy_ids, settings, false, true, iterations, &options);
}

PredictionSet predict_both(const Profile& profile, const Cluster& cluster,
                           const std::vector<std::string>& strategy_ids, const std::vector<Setting>& settings,
                           int32_t iterations, const SimOptions& options) {
  return predict_with(profile, cluster, strategy_ids, settings, true, true, iterations, &options);
}

nlohmann::json prediction_set_to_json(const PredictionSet& set) {
  nlohmann::json results = nlohmann::json::array();
  for (const Prediction& p : set.results) {
    nlohmann::json j = prediction_to_json(p);
    j["fits_memory"] = peak_memory_bytes(p) <= set.device_memory_bytes;
    results.push_back(std::move(j));
  }
  return {{"format", "trainsim.prediction/1"},
          {"model", set.model},
          {"cluster", set.cluster},
          {"batch_size", set.batch_size},
          {"results", std::move(results)}};
}

}  // namespace trainsim
