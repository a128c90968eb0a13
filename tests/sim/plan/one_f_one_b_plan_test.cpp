// `1f1b` plan: on stage k, min(K − k − 1, M) forwards of warm-up, then one
// forward and one backward in turn, the remaining backwards, then the flush;
// every op of mini-batch i reads version i.
#include <gtest/gtest.h>

#include "sim/des/engine.hpp"
#include "tests/sim/plan/pipeline_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::generate;
using testing_fixtures::schedule_text;
using testing_fixtures::simple_cluster;

Plan four_stage_plan(int32_t microbatches, int32_t iterations) {
  return generate("1f1b", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4),
                  {{"microbatches", std::to_string(microbatches)}}, iterations);
}

TEST(OneFOneBPlan, EachStageWarmsUpThenAlternatesThenDrains) {
  const Plan plan = four_stage_plan(5, 2);
  EXPECT_EQ(schedule_text(plan, 0),
            "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 B0.2 B0.3 B0.4 U | "
            "F1.0 F1.1 F1.2 F1.3 B1.0 F1.4 B1.1 B1.2 B1.3 B1.4 U |");
  EXPECT_EQ(schedule_text(plan, 2),
            "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 F0.4 B0.3 B0.4 U | "
            "F1.0 F1.1 B1.0 F1.2 B1.1 F1.3 B1.2 F1.4 B1.3 B1.4 U |");
  EXPECT_EQ(schedule_text(plan, 3),
            "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 F0.4 B0.4 U | "
            "F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3 F1.4 B1.4 U |");
  for (const Op& op : plan.ops) {
    if (is_compute(op.kind)) {
      EXPECT_EQ(op.weight_version, op.iteration) << op_kind_name(op.kind);
    }
  }
}

TEST(OneFOneBPlan, FewerMicroBatchesThanStagesWarmUpWithAllOfThem) {
  // M = 2 < K − 1 = 3 on stage 0: both forwards, then both backwards.
  EXPECT_EQ(schedule_text(four_stage_plan(2, 1), 0), "F0.0 F0.1 B0.0 B0.1 U |");
}

TEST(OneFOneBPlan, TheSimulatorTimesTheHopsTheWarmUpCannotHide) {
  // As the cost model's TheRoundTripPacesWhatTheWarmUpCannotHide: 8.17 ms
  // there; the simulated drain is a little shorter than the steady state.
  const Plan plan =
      generate("1f1b", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 2), {{"microbatches", "4"}}, 4);
  EXPECT_NEAR(simulate_plan(plan, simple_cluster(1, 2), SimOptions{}).iteration_s, 8.17e-3, 0.02 * 8.17e-3);
}

TEST(OneFOneBPlan, TheSimulatorTakesMPlusKMinusOneSteps) {
  // As the cost model's EqualStagesTakeMPlusKMinusOneSteps: 3.75 ms.
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  const Plan plan = generate("1f1b", chain_profile(4, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "12"}}, 4);
  EXPECT_NEAR(simulate_plan(plan, cluster, SimOptions{}).iteration_s, 3.75e-3, 1e-9);
}

}  // namespace
}  // namespace trainsim
