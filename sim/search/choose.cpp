// Strategy choice: each strategy's best settings, ranked by rank.hpp's rule;
// see choose.hpp.
#include "sim/search/choose.hpp"

#include <algorithm>
#include <functional>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/rank.hpp"

namespace trainsim {
namespace {

// Every combination of the choices' values, the empty one (defaults) first.
std::vector<std::vector<Setting>> combinations(const StrategyInfo& strategy) {
  std::vector<std::vector<Setting>> all = {{}};
  for (const auto& [key, values] : strategy.choices) {
    std::vector<std::vector<Setting>> next;
    for (const auto& partial : all) {
      for (const std::string& value : values) {
        std::vector<Setting> extended = partial;
        extended.push_back({key, value, "choose: " + key});
        next.push_back(std::move(extended));
      }
    }
    all.insert(all.end(), next.begin(), next.end());
  }
  return all;
}

// `tried` counts every combination priced (for the progress callback).
StrategyChoice choose_one(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                          double single_samples_per_s, const std::function<void()>& tried) {
  StrategyChoice choice;
  bool have_feasible = false;
  for (const std::vector<Setting>& settings : combinations(strategy)) {
    tried();
    StrategyConfig config;
    for (const Setting& s : settings) config.set(s.key, s.value, s.where);
    Prediction p;
    try {
      p = predict_bounded(strategy, profile, cluster, config);
    } catch (const InputError&) {
      continue;  // a combination this model and cluster do not allow (more micro-batches than samples, ...)
    }
    ++choice.candidates;
    p.speedup_vs_single = p.samples_per_s / single_samples_per_s;
    const bool fits = peak_memory_bytes(p) <= cluster.device.memory_bytes;
    const bool better = fits ? (!have_feasible || p.samples_per_s > choice.best.samples_per_s)
                             : (!have_feasible && (choice.candidates == 1 ||
                                                   peak_memory_bytes(p) < peak_memory_bytes(choice.best)));
    if (better) {
      choice.best = std::move(p);
      choice.settings = settings;
      have_feasible = have_feasible || fits;
    }
  }
  TRAINSIM_CHECK(choice.candidates > 0, strategy.id + ": no setting could be predicted");
  choice.feasible = have_feasible;
  if (!have_feasible) {
    choice.reason = "needs " + format_bytes(peak_memory_bytes(choice.best)) + " on a device that has " +
                    format_bytes(cluster.device.memory_bytes);
  }
  return choice;
}

}  // namespace

std::vector<StrategyChoice> choose_strategies(const Profile& profile, const Cluster& cluster,
                                              const std::vector<std::string>& strategy_ids,
                                              const std::function<void(int64_t, int64_t)>& progress) {
  // Checks the profile and the ids, and gives the single-device baseline.
  const PredictionSet baseline = predict_analytic(profile, cluster, {"single"}, {});
  const double single_samples_per_s = baseline.results.front().samples_per_s;
  std::vector<const StrategyInfo*> chosen;
  int64_t total = 0, done = 0;
  for (const StrategyInfo& strategy : strategy_registry()) {
    if (strategy_ids.empty() || std::find(strategy_ids.begin(), strategy_ids.end(), strategy.id) != strategy_ids.end()) {
      chosen.push_back(&strategy);
      total += static_cast<int64_t>(combinations(strategy).size());
    }
  }
  const std::function<void()> tried = [&] {
    if (progress) progress(done++, total);
  };
  std::vector<StrategyChoice> ranked;
  for (const StrategyInfo* strategy : chosen) {
    ranked.push_back(choose_one(*strategy, profile, cluster, single_samples_per_s, tried));
  }
  if (progress) progress(total, total);
  std::vector<Prediction> predictions;
  std::vector<bool> feasible;
  for (const StrategyChoice& c : ranked) {
    predictions.push_back(c.best);
    feasible.push_back(c.feasible);
  }
  std::vector<StrategyChoice> ordered;
  for (const RankEntry& entry : rank_predictions(predictions, feasible)) {
    ordered.push_back(std::move(ranked[entry.index]));
    ordered.back().rank = entry.rank;
    ordered.back().tied = entry.tied;
  }
  return ordered;
}

std::string explain_winner(const std::vector<StrategyChoice>& ranked) {
  std::vector<Prediction> predictions;
  std::vector<RankEntry> entries;
  for (const StrategyChoice& c : ranked) {
    entries.push_back({predictions.size(), c.rank, c.tied, c.feasible});
    predictions.push_back(c.best);
  }
  return explain_ranking(predictions, entries);
}

nlohmann::json choice_to_json(const std::vector<StrategyChoice>& ranked, const Profile& profile,
                              const Cluster& cluster) {
  nlohmann::json entries = nlohmann::json::array();
  for (const StrategyChoice& c : ranked) {
    nlohmann::json settings = nlohmann::json::object();
    for (const Setting& s : c.settings) settings[s.key] = s.value;
    entries.push_back({{"strategy", c.best.strategy},
                       {"rank", c.rank},
                       {"tied", c.tied},
                       {"feasible", c.feasible},
                       {"reason", c.reason},
                       {"settings", settings},
                       {"candidates", c.candidates},
                       {"prediction", prediction_to_json(c.best)}});
  }
  return {{"format", "trainsim.choice/1"},
          {"model", profile.model},
          {"cluster", cluster.name},
          {"batch_size", profile.batch_size},
          {"tie_relative", kTieRelative},
          {"tie_rule", tie_rule_text()},
          {"ranked", std::move(entries)},
          {"why", explain_winner(ranked)}};
}

}  // namespace trainsim
