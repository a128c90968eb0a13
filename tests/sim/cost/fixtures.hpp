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

// A prediction of 64 samples an iteration that takes `iteration_s`, all of
// it compute: what the bounds from outside the cost models raise.
inline Prediction predicted(double iteration_s) {
  Prediction p;
  p.iteration_s = iteration_s;
  p.samples_per_iteration = 64;
  p.samples_per_s = 64 / iteration_s;
  p.breakdown.compute_s = iteration_s;
  return p;
}

}  // namespace trainsim::testing_fixtures
