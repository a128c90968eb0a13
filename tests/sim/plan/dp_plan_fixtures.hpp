// Helpers for the data-parallel plan tests: generate a plan the way
// `trainsim simulate` does, pick ops out of it by worker, stream, kind and
// iteration, time it with the simulator, and generate it for an analytic
// ResNet-50 profile on every cluster preset.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim::testing_fixtures {

// Strategy `id`'s plan with `--set`-style settings, through generate_plan
// (which rejects keys the generator never read).
inline Plan generate(const std::string& id, const Profile& profile, const Cluster& cluster,
                     const Settings& settings = {}, int32_t iterations = 3) {
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  return generate_plan(find_strategy(id, "--strategies"), profile, cluster, std::move(config), iterations);
}

// The ops of worker `worker`'s stream `stream` in program order, those of
// iteration `iteration` only when it is >= 0.
inline std::vector<const Op*> stream_ops(const Plan& plan, int32_t worker, StreamKind stream, int32_t iteration = -1) {
  std::vector<const Op*> ops;
  for (OpId id : plan.streams[static_cast<size_t>(worker)][static_cast<size_t>(stream)]) {
    const Op& op = plan.ops[static_cast<size_t>(id)];
    if (iteration < 0 || op.iteration == iteration) ops.push_back(&op);
  }
  return ops;
}

// Ids of the ops of kind `kind` (of worker `worker` and iteration
// `iteration` when >= 0), ascending.
inline std::vector<OpId> ids_of(const Plan& plan, OpKind kind, int32_t worker = -1, int32_t iteration = -1) {
  std::vector<OpId> ids;
  for (OpId id = 0; id < static_cast<OpId>(plan.ops.size()); ++id) {
    const Op& op = plan.ops[static_cast<size_t>(id)];
    if (op.kind == kind && (worker < 0 || op.worker == worker) && (iteration < 0 || op.iteration == iteration)) {
      ids.push_back(id);
    }
  }
  return ids;
}

// A stream's program order as text: "forward0 backward0 update0 ..." (op
// kind and iteration), for order checks that read like the schedule.
inline std::string stream_text(const Plan& plan, int32_t worker, StreamKind stream) {
  std::string text;
  for (const Op* op : stream_ops(plan, worker, stream)) {
    if (!text.empty()) text += ' ';
    text += op_kind_name(op->kind) + std::to_string(op->iteration);
  }
  return text;
}

// Simulated steady-state iteration time, without stragglers or jitter.
inline double simulated_iteration_s(const Plan& plan, const Cluster& cluster) {
  return simulate_plan(plan, cluster, SimOptions{}).iteration_s;
}

inline double analytic_iteration_s(const std::string& id, const Profile& profile, const Cluster& cluster,
                                   const Settings& settings = {}) {
  return run_strategy(id, profile, cluster, settings).iteration_s;
}

// Generates (and so validates) strategy `id`'s plan for ResNet-50's analytic
// profile at its default batch on every preset, and for the two-layer and
// chain fixtures on one and on several machines.
inline void expect_plans_everywhere(const std::string& id, const Settings& settings = {}) {
  const Model resnet50 = build_zoo_model("resnet50");
  for (const Cluster& cluster : cluster_presets()) {
    const Profile profile = analytic_profile(resnet50, resnet50.default_batch, cluster);
    EXPECT_NO_THROW(generate(id, profile, cluster, settings, 2)) << id << " on " << cluster.name;
  }
  for (const Cluster& cluster :
       {simple_cluster(1, 1), simple_cluster(1, 4), simple_cluster(2, 2), simple_cluster(3, 2)}) {
    for (const Profile& profile : {two_layer_profile(), chain_profile(7, 1e-3, 2e-3, 1e6, 4e6)}) {
      EXPECT_NO_THROW(generate(id, profile, cluster, settings, 3))
          << id << " " << profile.model << " on " << cluster.machines << "x" << cluster.devices_per_machine;
    }
  }
}

}  // namespace trainsim::testing_fixtures
