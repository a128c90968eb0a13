// single plan: one worker's forward by layer group, backward in reverse,
// update; parameter-free layers ride with the next layer.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::layer;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_ops;

// l0 (1 MB of parameters), relu (none), l1 (2 MB), softmax (none): forward
// 1, 0.5, 2, 0.25 ms; backward twice that; activations 4, 4, 8, 1 MB.
Profile conv_relu_conv_softmax() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("l0", {"input"}, 1e-3, 2e-3, 1e6, 4e6));
  p.layers.push_back(layer("relu", {"l0"}, 0.5e-3, 1e-3, 0, 4e6));
  p.layers.push_back(layer("l1", {"relu"}, 2e-3, 4e-3, 2e6, 8e6));
  p.layers.push_back(layer("softmax", {"l1"}, 0.25e-3, 0.5e-3, 0, 1e6));
  return p;
}

TEST(SinglePlan, ParameterFreeLayersJoinTheNextLayersOps) {
  // Groups end at each layer with parameters: [l0], [relu, l1], and the
  // trailing [softmax]. Per iteration: 3 forwards up, 3 backwards down, update.
  const Plan plan = generate("single", conv_relu_conv_softmax(), simple_cluster(1, 1), {}, 2);
  const auto ops = stream_ops(plan, 0, StreamKind::kCompute, 1);
  ASSERT_EQ(ops.size(), 7u);
  const std::vector<std::pair<int32_t, int32_t>> forward_layers = {{0, 0}, {1, 2}, {3, 3}};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(ops[k]->kind, OpKind::kForward);
    EXPECT_EQ(std::make_pair(ops[k]->first_layer, ops[k]->last_layer), forward_layers[k]);
    EXPECT_EQ(ops[3 + k]->kind, OpKind::kBackward);
    EXPECT_EQ(std::make_pair(ops[3 + k]->first_layer, ops[3 + k]->last_layer), forward_layers[2 - k]);
  }
  EXPECT_EQ(ops[6]->kind, OpKind::kUpdate);
  EXPECT_EQ(plan.ops.size(), 14u);
  EXPECT_EQ(plan.workers.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.samples_per_iteration, 32);
}

TEST(SinglePlan, OpsEndOnlyWhereOneTensorPassesNotInsideAResidualBlock) {
  // stem -> [a -> b] + stem -> add -> head: the cuts after a and b carry the
  // branch and the shortcut, so the block is one op: [stem], [a, b, add], [head].
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("stem", {"input"}, 1e-3, 2e-3, 1e6, 4e6));
  p.layers.push_back(layer("a", {"stem"}, 1e-3, 2e-3, 1e6, 4e6));
  p.layers.push_back(layer("b", {"a"}, 1e-3, 2e-3, 1e6, 4e6));
  p.layers.push_back(layer("add", {"b", "stem"}, 0.1e-3, 0.1e-3, 0, 4e6));
  p.layers.push_back(layer("head", {"add"}, 1e-3, 2e-3, 1e6, 1e6));
  const Plan plan = generate("single", p, simple_cluster(1, 1), {}, 1);
  const auto ops = stream_ops(plan, 0, StreamKind::kCompute);
  ASSERT_EQ(ops.size(), 7u);
  const std::vector<std::pair<int32_t, int32_t>> forward_layers = {{0, 0}, {1, 3}, {4, 4}};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(ops[k]->kind, OpKind::kForward);
    EXPECT_EQ(std::make_pair(ops[k]->first_layer, ops[k]->last_layer), forward_layers[k]);
    EXPECT_EQ(std::make_pair(ops[3 + k]->first_layer, ops[3 + k]->last_layer), forward_layers[2 - k]);
  }
}

TEST(SinglePlan, OpTimesAndMemoryComeFromTheProfile) {
  const Plan plan = generate("single", conv_relu_conv_softmax(), simple_cluster(1, 1), {}, 1);
  const auto ops = stream_ops(plan, 0, StreamKind::kCompute);
  // Forward [relu, l1]: 0.5 + 2 ms, allocating 4 + 8 MB; its backward 1 + 4 ms, freeing them.
  EXPECT_NEAR(ops[1]->work_s, 2.5e-3, 1e-15);
  EXPECT_DOUBLE_EQ(ops[1]->alloc_bytes, 12e6);
  EXPECT_NEAR(ops[4]->work_s, 5e-3, 1e-15);
  EXPECT_DOUBLE_EQ(ops[4]->free_bytes, 12e6);
  // Update of 3 MB: 5 passes at 100 GB/s = 1.5e-4 s.
  EXPECT_NEAR(ops[6]->work_s, 1.5e-4, 1e-15);
  // Weights, gradients and momentum of 3 MB each stay; activations come and go.
  EXPECT_DOUBLE_EQ(plan.workers[0].static_bytes, 9e6);
  double allocated = 0, freed = 0;
  for (const Op* op : ops) {
    allocated += op->alloc_bytes;
    freed += op->free_bytes;
  }
  EXPECT_DOUBLE_EQ(allocated, 17e6);
  EXPECT_DOUBLE_EQ(freed, 17e6);
}

TEST(SinglePlan, SimulatedPeakMemoryIsTheCostModels) {
  // 9 MB held throughout + 17 MB of activations at the end of the forward.
  const Profile profile = conv_relu_conv_softmax();
  const Cluster cluster = simple_cluster(1, 1);
  const SimResult result = simulate_plan(generate("single", profile, cluster, {}, 3), cluster, SimOptions{});
  EXPECT_DOUBLE_EQ(result.workers.at(0).peak_memory_bytes, 26e6);
  EXPECT_DOUBLE_EQ(testing_fixtures::run_strategy("single", profile, cluster).memory.at(0).total_bytes(), 26e6);
}

TEST(SinglePlan, IterationIReadsWeightVersionI) {
  const Plan plan = generate("single", testing_fixtures::two_layer_profile(), simple_cluster(1, 1), {}, 3);
  for (const Op& op : plan.ops) EXPECT_EQ(op.weight_version, op.iteration);
}

TEST(SinglePlan, SimulatedIterationEqualsTheClosedForm) {
  // Σfw + Σbw + update = 3.75 + 7.5 + 0.15 ms = 11.4 ms; nothing else runs.
  const Profile profile = conv_relu_conv_softmax();
  const Cluster cluster = simple_cluster(1, 1);
  const Plan plan = generate("single", profile, cluster, {}, 6);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, cluster), 11.4e-3, 1e-8);
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("single", profile, cluster), 11.4e-3, 1e-12);
}

TEST(SinglePlan, TakesNoSettings) {
  EXPECT_THROW(generate("single", testing_fixtures::two_layer_profile(), simple_cluster(1, 1), {{"workers", "1"}}),
               InputError);
}

TEST(SinglePlan, ValidatesOnFixturesAndEveryPreset) { testing_fixtures::expect_plans_everywhere("single"); }

}  // namespace
}  // namespace trainsim
