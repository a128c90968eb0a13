// dp-overlap plan: backward in bucket-closing pieces, each bucket's
// AllReduce right after the piece that completes it, update after the last.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::layer;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_ops;

// As DpOverlap's cost tests: l0, relu, l1, l2; forward and backward 1 ms
// each (relu 0.5 ms), 1 MB of parameters each (relu none), 1 MB of activations.
Profile three_layers_and_a_relu() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("l0", {"input"}, 1e-3, 1e-3, 1e6, 1e6));
  p.layers.push_back(layer("relu", {"l0"}, 0.5e-3, 0.5e-3, 0, 1e6));
  p.layers.push_back(layer("l1", {"relu"}, 1e-3, 1e-3, 1e6, 1e6));
  p.layers.push_back(layer("l2", {"l1"}, 1e-3, 1e-3, 1e6, 1e6));
  return p;
}

const testing_fixtures::Settings kBuckets = {{"bucket_bytes", "1.5MB"}};

TEST(DpOverlapPlan, BucketAllReduceDependsOnTheBackwardThatClosesIt) {
  // Buckets of 1.5 MB from the last layer: A = {l2, l1} closes at l1 (layer
  // 2), B = {l0}; backward runs as pieces [2, 3] then [0, 1] (relu and l0).
  const Plan plan = generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), kBuckets, 2);
  for (int32_t w = 0; w < 4; ++w) {
    const auto compute = stream_ops(plan, w, StreamKind::kCompute, 1);
    ASSERT_EQ(compute.size(), 4u);  // forward, 2 backward pieces, update
    EXPECT_EQ(std::make_pair(compute[1]->first_layer, compute[1]->last_layer), std::make_pair(2, 3));
    EXPECT_NEAR(compute[1]->work_s, 2e-3, 1e-15);
    EXPECT_EQ(std::make_pair(compute[2]->first_layer, compute[2]->last_layer), std::make_pair(0, 1));
    EXPECT_NEAR(compute[2]->work_s, 1.5e-3, 1e-15);
    const std::vector<OpId> backward = ids_of(plan, OpKind::kBackward, w, 1);
    const std::vector<OpId> allreduce = ids_of(plan, OpKind::kAllReduce, w, 1);
    ASSERT_EQ(allreduce.size(), 2u);
    EXPECT_EQ(plan.ops[allreduce[0]].deps, std::vector<OpId>{backward[0]});
    EXPECT_DOUBLE_EQ(plan.ops[allreduce[0]].bytes, 2e6);
    EXPECT_EQ(std::make_pair(plan.ops[allreduce[0]].first_layer, plan.ops[allreduce[0]].last_layer),
              std::make_pair(2, 3));
    EXPECT_EQ(plan.ops[allreduce[1]].deps, std::vector<OpId>{backward[1]});
    EXPECT_DOUBLE_EQ(plan.ops[allreduce[1]].bytes, 1e6);
    // The update waits for the last bucket; the send stream orders the rest.
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, w, 1).at(0)].deps, std::vector<OpId>{allreduce[1]});
    EXPECT_EQ(testing_fixtures::stream_text(plan, w, StreamKind::kSend), "allreduce0 allreduce0 allreduce1 allreduce1");
  }
}

TEST(DpOverlapPlan, A25MBBucketHoldsASmallModelWhole) {
  // 25 MB > 3 MB: one bucket, closed by l0's piece, the whole backward.
  const Plan plan = generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 2), {{"bucket_bytes", "25MB"}}, 1);
  const std::vector<OpId> allreduce = ids_of(plan, OpKind::kAllReduce, 0);
  ASSERT_EQ(allreduce.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.ops[allreduce[0]].bytes, 3e6);
  EXPECT_EQ(ids_of(plan, OpKind::kBackward, 0).size(), 1u);
  EXPECT_DOUBLE_EQ(plan.config["bucket_bytes"].get<double>(), 25e6);
}

TEST(DpOverlapPlan, BucketBuffersAddAGradientCopyToStaticMemory) {
  // 3 MB each of weights, gradients, momentum, and the flat bucket copy.
  const Plan plan = generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 2), kBuckets);
  for (const PlanWorker& w : plan.workers) EXPECT_DOUBLE_EQ(w.static_bytes, 12e6);
}

TEST(DpOverlapPlan, SimulatedIterationEqualsTheFlowShop) {
  // DpOverlap's cost tests derive 7.395 ms on 1 × 4 and 10.835 ms on 2 × 2
  // (bucket B waits for A there); the simulator runs the same schedule.
  const Profile profile = three_layers_and_a_relu();
  const std::vector<std::pair<Cluster, double>> cases = {{simple_cluster(1, 4), 7.395e-3},
                                                         {simple_cluster(2, 2), 10.835e-3}};
  for (const auto& [cluster, expected_s] : cases) {
    EXPECT_NEAR(testing_fixtures::analytic_iteration_s("dp-overlap", profile, cluster, kBuckets), expected_s, 1e-12);
    const Plan plan = generate("dp-overlap", profile, cluster, kBuckets, 8);
    EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, cluster), expected_s, 0.01 * expected_s);
  }
}

TEST(DpOverlapPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {{"workers", "2"}, {"algorithm", "tree"}, {"bucket_bytes", "1MB"}};
  EXPECT_EQ(
      generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), settings).config,
      testing_fixtures::run_strategy("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), settings).config);
  EXPECT_THROW(generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), {{"chunks", "0-3"}}),
               InputError);
  EXPECT_THROW(generate("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), {{"bucket_bytes", "0"}}),
               InputError);
}

TEST(DpOverlapPlan, ValidatesOnFixturesAndEveryPreset) {
  testing_fixtures::expect_plans_everywhere("dp-overlap");
  testing_fixtures::expect_plans_everywhere("dp-overlap", {{"bucket_bytes", "1MB"}});
}

}  // namespace
}  // namespace trainsim
