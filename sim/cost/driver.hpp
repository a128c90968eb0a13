// The predict driver: runs the selected strategies' cost models on one
// profile and cluster, routes `--set` keys to the strategies that read them,
// and fills each speedup against `single`. It never names a strategy.
#pragma once

#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {

// One `--set key=value`. A key "id.key" (e.g. "gpipe.microbatches") reaches
// only that strategy; a plain key reaches every selected strategy that reads it.
struct Setting {
  std::string key;
  std::string value;  // raw text, parsed by StrategyConfig
  std::string where;  // "--set workers" or "cfg.json: workers"
};

// The analytic method's bounds from outside the cost models, which price a
// device per worker and an op by its work: a shared device's work and each
// GPU worker's host (docs/equations.md §11-12), read from `plan`.
void price_plan_bounds(const Plan& plan, const Cluster& cluster, Prediction& prediction);

// Iterations of the plan whose ops bound an analytic prediction, at least.
inline constexpr int32_t kPlanBoundIterations = 20;

// predict_strategy, bounded (price_plan_bounds) by a plan of
// kPlanBoundIterations rounded up to whole iteration periods (the bounds
// are per iteration: more would change nothing), where the cluster shares
// devices or prices a GPU worker's host: what predict, choose and simulate
// report as the analytic method's. Where that plan cannot be made (past
// the plans' limits, which the cost models do not have), the cost model's
// own figure, saying so in a note.
Prediction predict_bounded(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                           const StrategyConfig& config);

// Parses "key=value"; InputError naming `where` otherwise.
Setting parse_setting(const std::string& text, const std::string& where);

// Strategy ids from "all" or "id,id"; InputError on unknown ids.
std::vector<std::string> parse_strategy_list(const std::string& text, const std::string& where);

struct PredictionSet {
  std::string model;
  std::string cluster;
  int64_t batch_size = 0;
  double device_memory_bytes = 0;  // per device, to flag what does not fit
  std::vector<Prediction> results; // in the order asked
};

// Analytic predictions of `strategy_ids` (all of them when empty).
PredictionSet predict_analytic(const Profile& profile, const Cluster& cluster,
                               const std::vector<std::string>& strategy_ids,
                               const std::vector<Setting>& settings);

struct SimOptions;

// Simulated predictions: each strategy's plan of `iterations` iterations timed
// by the discrete-event simulator (sim/des); staleness is the analytic model's.
PredictionSet predict_simulated(const Profile& profile, const Cluster& cluster,
                                const std::vector<std::string>& strategy_ids, const std::vector<Setting>& settings,
                                int32_t iterations, const SimOptions& options);

// Analytic and simulated results side by side, in that order per strategy.
PredictionSet predict_both(const Profile& profile, const Cluster& cluster,
                           const std::vector<std::string>& strategy_ids, const std::vector<Setting>& settings,
                           int32_t iterations, const SimOptions& options);

// trainsim.prediction/1 document.
nlohmann::json prediction_set_to_json(const PredictionSet& set);

}  // namespace trainsim
