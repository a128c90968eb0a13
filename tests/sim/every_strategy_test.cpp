// Every strategy simulates on zoo models on every preset: a plan that
// validates, a positive steady-state iteration time, and per-worker
// breakdowns that sum to the measured window.
#include <gtest/gtest.h>

#include "model/error.hpp"
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
        for (const Op& op : plan.ops) {
          if (op.kind == OpKind::kSend) {
            EXPECT_NE(op.payload, Payload::kNone) << "a send without its payload";
          }
        }
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

// The same op graph: what each op does, where, after what. Durations may differ.
void expect_same_structure(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.ops.size(), b.ops.size());
  EXPECT_EQ(a.groups, b.groups);
  EXPECT_EQ(a.streams, b.streams);
  for (size_t id = 0; id < a.ops.size(); ++id) {
    const Op& x = a.ops[id];
    const Op& y = b.ops[id];
    EXPECT_TRUE(x.kind == y.kind && x.worker == y.worker && x.stage == y.stage && x.microbatch == y.microbatch &&
                x.iteration == y.iteration && x.first_layer == y.first_layer && x.last_layer == y.last_layer &&
                x.peer == y.peer && x.group == y.group && x.deps == y.deps && x.payload == y.payload &&
                x.weights == y.weights && x.weight_ahead == y.weight_ahead && x.codec == y.codec &&
                x.dense_only == y.dense_only)
        << "op " << id;
  }
}

// validate predicts from a profile other than the one a run's plan was made
// from; the settings the run resolved must give back the same plan.
TEST(EveryStrategy, ResolvedSettingsRegenerateThePlanFromAnotherProfile) {
  const Model model = build_zoo_model("resnet50");
  const Cluster cluster = cluster_presets().front();
  const Profile profile = analytic_profile(model, model.default_batch, cluster);
  // Another profile: the first third of the layers three times slower, so the
  // defaults (partition, chunks, buckets) would come out otherwise.
  Profile other = profile;
  for (size_t i = 0; i < other.layers.size() / 3; ++i) {
    other.layers[i].forward_s *= 3;
    other.layers[i].backward_s *= 3;
  }
  int32_t defaults_differ = 0;
  for (const StrategyInfo& strategy : strategy_registry()) {
    SCOPED_TRACE(strategy.id);
    const Plan plan = generate_plan(strategy, profile, cluster, {}, 6);
    const StrategyConfig resolved = StrategyConfig::from_resolved(plan.config, "plan");
    const Plan again = generate_plan(strategy, profile, cluster, resolved, 6);
    EXPECT_EQ(again.config, plan.config);
    expect_same_structure(plan, again);
    for (size_t id = 0; id < plan.ops.size(); ++id) {
      EXPECT_EQ(again.ops[id].work_s, plan.ops[id].work_s);
    }
    const Plan moved = generate_plan(strategy, other, cluster, resolved, 6);
    EXPECT_EQ(moved.config, plan.config);
    expect_same_structure(plan, moved);
    if (generate_plan(strategy, other, cluster, {}, 6).config != plan.config) ++defaults_differ;
  }
  EXPECT_GT(defaults_differ, 0) << "the other profile changes no default, so the test shows nothing";
}

TEST(StrategyConfigFromResolved, NamesItsOriginForAValueNoGetterAccepts) {
  const StrategyInfo& gpipe = find_strategy("gpipe", "test");
  const Model model = build_zoo_model("resnet50");
  const Cluster cluster = cluster_presets().front();
  const Profile profile = analytic_profile(model, model.default_batch, cluster);
  try {
    generate_plan(gpipe, profile, cluster, StrategyConfig::from_resolved({{"microbatches", -2}}, "run.json"), 2);
    FAIL() << "a negative micro-batch count was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run.json: microbatches"), std::string::npos) << e.what();
  }
  EXPECT_THROW(StrategyConfig::from_resolved(nlohmann::json::array(), "run.json"), InputError);
}

}  // namespace
}  // namespace trainsim
