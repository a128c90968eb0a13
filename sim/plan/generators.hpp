// The strategies' plan generators, one file each, behind one signature; the
// registry (sim/cost/strategies.hpp) is the only place that lists them.
#pragma once

#include <cstdint>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

struct Plan;
// A plan generator reads the same settings as the cost model (and resolves
// the same defaults), and writes the ops of `iterations` training iterations.
using PlanGenerator = Plan (*)(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                               int32_t iterations);

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
Plan plan_1f1b(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_zb_h1(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_dsp(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);
Plan plan_parallax(const Profile&, const Cluster&, StrategyConfig&, int32_t iterations);

}  // namespace trainsim
