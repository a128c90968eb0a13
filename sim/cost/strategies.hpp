// The strategy registry: each strategy's cost model (models.hpp) and plan
// generator (sim/plan/generators.hpp) with its settings; registry.cpp is the
// only place that names them all.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"
#include "sim/plan/generators.hpp"

namespace trainsim {

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

}  // namespace trainsim
