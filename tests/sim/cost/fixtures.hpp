// Runs one strategy's cost model with `--set`-style settings, for the cost-model tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/cost/strategies.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim::testing_fixtures {

// Settings as `--set key=value` pairs, applied in order.
using Settings = std::vector<std::pair<std::string, std::string>>;

// Runs strategy `id` the way `trainsim predict` would: each setting recorded
// with where "--set <key>", then predict_strategy, which also rejects keys
// the strategy never read.
inline Prediction run_strategy(const std::string& id, const Profile& profile, const Cluster& cluster,
                               const Settings& settings = {}) {
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  return predict_strategy(find_strategy(id, "--strategies"), profile, cluster, std::move(config));
}

}  // namespace trainsim::testing_fixtures
