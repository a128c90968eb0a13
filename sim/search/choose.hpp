// `trainsim choose`: every strategy with its own best settings, ranked by
// predicted samples/s. Each strategy's defaults already run its own searches
// (partitions, chunkings, buckets, segments); on top of them every
// combination of the registry's `choices` is tried. A setting whose memory
// does not fit a device is excluded with the reason.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/prediction.hpp"

namespace trainsim {

struct StrategyChoice {
  Prediction best;             // the fastest feasible setting (or, if none fits, the smallest)
  std::vector<Setting> settings;  // what was set on top of the defaults
  int32_t candidates = 0;      // settings tried
  bool feasible = true;        // fits the device memory
  std::string reason;          // why it is excluded, when not feasible
};

// One entry per strategy of `strategy_ids` (all when empty): the feasible
// ones first, fastest first, then the excluded ones, smallest memory first.
// `progress`, when given, hears (settings priced, settings in all) before each
// and once at the end.
std::vector<StrategyChoice> choose_strategies(const Profile& profile, const Cluster& cluster,
                                              const std::vector<std::string>& strategy_ids,
                                              const std::function<void(int64_t, int64_t)>& progress = {});

// One line on why the first choice beats the second: each one's dominant
// cost and how long it takes per iteration.
std::string explain_winner(const std::vector<StrategyChoice>& ranked);

// trainsim.choice/1: model, cluster, batch_size, ranked (strategy, feasible,
// reason, settings, candidates, prediction) and why.
nlohmann::json choice_to_json(const std::vector<StrategyChoice>& ranked, const Profile& profile,
                              const Cluster& cluster);

}  // namespace trainsim
