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
  int32_t rank = 0;            // 1-based, shared within a tie (rank.hpp); 0 when excluded
  bool tied = false;           // ties with another within rank.hpp's kTieRelative
  std::string reason;          // why it is excluded, when not feasible
};

// One entry per strategy of `strategy_ids` (all when empty), ranked by
// rank_predictions (sim/search/rank.hpp): the feasible ones first, fastest
// first with ties broken by preference, then the excluded ones, smallest
// memory first.
// `progress`, when given, hears (settings priced, settings in all) before each
// and once at the end.
std::vector<StrategyChoice> choose_strategies(const Profile& profile, const Cluster& cluster,
                                              const std::vector<std::string>& strategy_ids,
                                              const std::function<void(int64_t, int64_t)>& progress = {});

// One line on the head of the ranking (explain_ranking, sim/search/rank.hpp):
// a tie named as one with what broke it, or the winner against the runner-up
// in samples/s and time per the same number of samples.
std::string explain_winner(const std::vector<StrategyChoice>& ranked);

// trainsim.choice/1: model, cluster, batch_size, tie_relative (kTieRelative),
// tie_rule (tie_rule_text),
// ranked (strategy, rank, tied, feasible, reason, settings, candidates,
// prediction) and why.
nlohmann::json choice_to_json(const std::vector<StrategyChoice>& ranked, const Profile& profile,
                              const Cluster& cluster);

}  // namespace trainsim
