// dp-ring plan: forward, backward, one AllReduce of every gradient, update.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_text;
using testing_fixtures::two_layer_profile;

TEST(DpRingPlan, EachWorkerRunsForwardBackwardAllReduceUpdate) {
  const Plan plan = generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), {}, 2);
  ASSERT_EQ(plan.workers.size(), 4u);
  ASSERT_EQ(plan.groups, (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}}));
  EXPECT_DOUBLE_EQ(plan.samples_per_iteration, 4 * 32);
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_EQ(stream_text(plan, w, StreamKind::kCompute), "forward0 backward0 update0 forward1 backward1 update1");
    EXPECT_EQ(stream_text(plan, w, StreamKind::kSend), "allreduce0 allreduce1");
    for (int32_t i = 0; i < 2; ++i) {
      const OpId backward = ids_of(plan, OpKind::kBackward, w, i).at(0);
      const OpId allreduce = ids_of(plan, OpKind::kAllReduce, w, i).at(0);
      const Op& ar = plan.ops[allreduce];
      EXPECT_DOUBLE_EQ(ar.bytes, 3e6);  // M = 1 + 2 MB
      EXPECT_EQ(ar.group, 0);
      EXPECT_EQ(ar.algorithm, CollectiveAlgorithm::kRing);
      EXPECT_EQ(ar.deps, std::vector<OpId>{backward});
      EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, w, i).at(0)].deps, std::vector<OpId>{allreduce});
    }
  }
  // Each replica holds weights, gradients and momentum of 3 MB.
  for (const PlanWorker& w : plan.workers) EXPECT_DOUBLE_EQ(w.static_bytes, 9e6);
}

TEST(DpRingPlan, AlgorithmSettingReachesTheCollective) {
  const Plan plan = generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), {{"algorithm", "rabenseifner"}});
  for (OpId id : ids_of(plan, OpKind::kAllReduce))
    EXPECT_EQ(plan.ops[id].algorithm, CollectiveAlgorithm::kRabenseifner);
  EXPECT_EQ(plan.config["algorithm"], "rabenseifner");
}

TEST(DpRingPlan, OneWorkerCommunicatesNothing) {
  const Plan plan = generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), {{"workers", "1"}});
  EXPECT_EQ(plan.workers.size(), 1u);
  EXPECT_TRUE(plan.groups.empty());
  EXPECT_TRUE(ids_of(plan, OpKind::kAllReduce).empty());
  EXPECT_EQ(plan.ops.size(), 9u);  // forward, backward, update × 3 iterations
}

TEST(DpRingPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {{"workers", "3"}, {"algorithm", "tree"}};
  const Plan plan = generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), settings);
  EXPECT_EQ(plan.config,
            testing_fixtures::run_strategy("dp-ring", two_layer_profile(), simple_cluster(1, 4), settings).config);
  EXPECT_EQ(generate("dp-ring", two_layer_profile(), simple_cluster(1, 4)).config,
            testing_fixtures::run_strategy("dp-ring", two_layer_profile(), simple_cluster(1, 4)).config);
  EXPECT_THROW(generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), {{"bucket_bytes", "1MB"}}), InputError);
  EXPECT_THROW(generate("dp-ring", two_layer_profile(), simple_cluster(1, 4), {{"workers", "5"}}), InputError);
}

TEST(DpRingPlan, SimulatedIterationEqualsTheClosedForm) {
  // 1 × 4 (DpRing's cost test): Σfw + Σbw + update = 3 + 6 + 0.15 ms, ring
  // AllReduce(3 MB) = 6·1e-5 + 1.5·3e6·1e-10 + 0.75·3e6·2e-11 = 5.55e-4,
  // + t_sync 2e-5: 9.725 ms. Across 2 × 2 machines the slower link paces it.
  const Profile profile = two_layer_profile();
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("dp-ring", profile, simple_cluster(1, 4)), 9.725e-3, 1e-12);
  for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(2, 2), simple_cluster(3, 2)}) {
    const double analytic_s = testing_fixtures::analytic_iteration_s("dp-ring", profile, cluster);
    const double simulated_s =
        testing_fixtures::simulated_iteration_s(generate("dp-ring", profile, cluster, {}, 8), cluster);
    EXPECT_NEAR(simulated_s, analytic_s, 0.01 * analytic_s) << cluster.machines << " machines";
  }
}

TEST(DpRingPlan, ValidatesOnFixturesAndEveryPreset) { testing_fixtures::expect_plans_everywhere("dp-ring"); }

}  // namespace
}  // namespace trainsim
