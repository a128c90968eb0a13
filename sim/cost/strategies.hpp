// The strategies' closed-form cost models, one file each, behind one
// signature; the registry (registry.cpp) is the only place that names them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// A cost model reads its settings through `config` (so unknown keys are caught
// and defaults are echoed) and returns a prediction with every field but
// speedup_vs_single, which the driver fills against `single`.
using CostModel = Prediction (*)(const Profile& profile, const Cluster& cluster, StrategyConfig& config);

struct Plan;
// A plan generator reads the same settings as the cost model (and resolves
// the same defaults), and writes the ops of `iterations` training iterations.
using PlanGenerator = Plan (*)(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                               int32_t iterations);

struct StrategyInfo {
  std::string id;                 // "dp-ring"
  std::string summary;            // one line
  std::string source;             // seed paper and section
  std::vector<std::string> keys;  // settings it reads
  CostModel predict = nullptr;
  PlanGenerator plan = nullptr;
  // Settings `trainsim choose` tries beyond the defaults, whose own searches
  // (partitions, chunks, buckets, segments) fill in the rest: key -> values;
  // every combination is tried.
  std::vector<std::pair<std::string, std::vector<std::string>>> choices = {};
};

// Every strategy, in the order tables list them.
const std::vector<StrategyInfo>& strategy_registry();
const StrategyInfo& find_strategy(const std::string& id, const std::string& where);

// Runs one strategy's model on its own settings, checking every key was used.
Prediction predict_strategy(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                            StrategyConfig config);

// Generates one strategy's plan on its own settings, checking every key was used.
Plan generate_plan(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                   StrategyConfig config, int32_t iterations);

Prediction predict_single(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dp_ps(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dp_ring(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dp_overlap(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_pipesgd(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_cgdp(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_pipedream(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_pipedream_sync(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dualpipe(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_gpipe(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dsp(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_parallax(const Profile&, const Cluster&, StrategyConfig&);

Plan plan_single(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dp_ps(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dp_ring(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dp_overlap(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_pipesgd(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_cgdp(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_pipedream(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_pipedream_sync(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dualpipe(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_gpipe(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dsp(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_parallax(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);

}  // namespace trainsim
