// The strategies' closed-form cost models, one file each, behind one
// signature; the registry (strategies.hpp) is the only place that lists them.
#pragma once

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// A cost model reads its settings through `config` (so unknown keys are caught
// and defaults are echoed) and returns a prediction with every field but
// speedup_vs_single, which the driver fills against `single`.
using CostModel = Prediction (*)(const Profile& profile, const Cluster& cluster, StrategyConfig& config);

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
Prediction predict_1f1b(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_zb_h1(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_dsp(const Profile&, const Cluster&, StrategyConfig&);
Prediction predict_parallax(const Profile&, const Cluster&, StrategyConfig&);

}  // namespace trainsim
