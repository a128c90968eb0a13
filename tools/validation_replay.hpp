// `trainsim validate --replay`: a recorded validation (trainsim.validation/1)
// priced again from a profile and a cluster (its --profile-out and
// --cluster-out, or others), each strategy's plan as it ran (its recorded
// settings and iterations) against its recorded measurement. Nothing runs:
// a measurement taken on one machine checks a changed cost model or
// simulator on another.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "tools/commands.hpp"

namespace trainsim {

struct ReplayedStrategy {
  std::string strategy;  // the entry as validated: an id, or id:key=value
  std::string skipped;   // why it did not run, as recorded; the rest unset
  double measured_s = 0;
  double recorded_simulated_s = 0;
  double recorded_analytic_s = 0;
  double simulated_s = 0;  // priced again
  double analytic_s = 0;
};

// Each recorded strategy priced again (price_plan). InputError naming
// `where` (the file) for a document that is not a validation or a strategy
// trainsim does not know, and naming --profile where the profile is of
// another model or batch than the validation's.
std::vector<ReplayedStrategy> replay_validation(const nlohmann::json& recorded, const std::string& where,
                                                const Profile& profile, const Cluster& cluster);

// trainsim.validation_replay/1: the replay's strategies with their errors,
// recorded and priced again, and the median |error| of each.
nlohmann::json replay_to_json(const std::vector<ReplayedStrategy>& replayed, const std::string& validation,
                              const Profile& profile, const Cluster& cluster);

// validate's --replay, --profile and --cluster, and the options given
// beside them that only a validation that runs reads.
struct ReplayOptions {
  std::string replay;
  std::string profile;
  std::string cluster;
  std::vector<std::string> run_options;
};
void add_replay_options(CLI::App& validate, ReplayOptions& o);
// After parsing: the options given that --replay refuses.
void note_run_options(const CLI::App& validate, ReplayOptions& o);

// The command with --replay: the table (and --json) of the validation
// priced again from the profile and cluster files; true. False without
// --replay (InputError where --profile or --cluster is given without it).
bool replays(const ReplayOptions& o, const std::string& json, bool quiet, CommandContext& ctx);

}  // namespace trainsim
