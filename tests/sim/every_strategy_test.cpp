// Every strategy simulates on zoo models on every preset: a plan that
// validates, a positive steady-state iteration time, and per-worker
// breakdowns that sum to the measured window.
#include <gtest/gtest.h>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

TEST(EveryStrategy, SimulatesOnZooModelsOnEveryPreset) {
  for (const char* model_name : {"resnet50", "transformer"}) {
    const Model model = build_zoo_model(model_name);
    for (const Cluster& cluster : cluster_presets()) {
      const Profile profile = analytic_profile(model, model.default_batch, cluster);
      for (const StrategyInfo& strategy : strategy_registry()) {
        SCOPED_TRACE(std::string(model_name) + " on " + cluster.name + ": " + strategy.id);
        const Plan plan = generate_plan(strategy, profile, cluster, {}, 8);
        const SimResult r = simulate_plan(plan, cluster, SimOptions{});
        EXPECT_GT(r.iteration_s, 0);
        EXPECT_GE(r.iteration_max_s, r.iteration_s);
        EXPECT_LE(r.iteration_min_s, r.iteration_s);
        for (const WorkerResult& w : r.workers) {
          EXPECT_NEAR(w.breakdown.total_s(), r.window_s, 1e-9 * r.window_s + 1e-12);
          EXPECT_GT(w.peak_memory_bytes, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace trainsim
