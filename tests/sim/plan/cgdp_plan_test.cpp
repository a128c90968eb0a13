// cgdp plan: per chunk, backward (with its stream sync), copy to the host,
// one host sum per machine, copy back; the update waits for the last chunk.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::layer;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_text;

// As Cgdp's cost tests: l0 (4 MB of parameters), relu (none), l2 (8 MB);
// forward and backward 1 ms each. chunk_size 1 gives chunks {l2} and
// {l0, relu}.
Profile three_layers() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("l0", {"input"}, 1e-3, 1e-3, 4e6, 1e6));
  p.layers.push_back(layer("relu", {"l0"}, 1e-3, 1e-3, 0, 1e6));
  p.layers.push_back(layer("l2", {"relu"}, 1e-3, 1e-3, 8e6, 1e6));
  return p;
}

TEST(CgdpPlan, EachChunkGoesToTheHostAndBackWhileBackwardContinues) {
  const Plan plan = generate("cgdp", three_layers(), simple_cluster(1, 4), {}, 2);
  const std::vector<OpId> sums = ids_of(plan, OpKind::kHostAccumulate, -1, 1);
  ASSERT_EQ(sums.size(), 2u);  // one per chunk, on machine 0's first worker
  EXPECT_EQ(plan.ops[sums[0]].worker, 0);
  EXPECT_DOUBLE_EQ(plan.ops[sums[0]].bytes, 4 * 8e6);  // 4 devices' copies of {l2}
  EXPECT_DOUBLE_EQ(plan.ops[sums[1]].bytes, 4 * 4e6);
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_EQ(stream_text(plan, w, StreamKind::kCompute),
              "forward0 backward0 backward0 update0 "
              "forward1 backward1 backward1 update1");
    const std::vector<OpId> backward = ids_of(plan, OpKind::kBackward, w, 1);
    const std::vector<OpId> to_host = ids_of(plan, OpKind::kCopyToHost, w, 1);
    const std::vector<OpId> to_device = ids_of(plan, OpKind::kCopyToDevice, w, 1);
    ASSERT_EQ(to_host.size(), 2u);
    ASSERT_EQ(to_device.size(), 2u);
    // Chunk {l2}: backward 1 ms + the 20 us stream sync, then its 8 MB copy.
    EXPECT_EQ(std::make_pair(plan.ops[backward[0]].first_layer, plan.ops[backward[0]].last_layer),
              std::make_pair(2, 2));
    EXPECT_NEAR(plan.ops[backward[0]].work_s, 1.02e-3, 1e-15);
    EXPECT_NEAR(plan.ops[backward[1]].work_s, 2.02e-3, 1e-15);  // {l0, relu}
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_EQ(plan.ops[to_host[c]].deps, std::vector<OpId>{backward[c]});
      EXPECT_DOUBLE_EQ(plan.ops[to_host[c]].bytes, c == 0 ? 8e6 : 4e6);
      EXPECT_EQ(plan.ops[to_device[c]].deps, std::vector<OpId>{sums[c]});
    }
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, w, 1).at(0)].deps, std::vector<OpId>{to_device[1]});
  }
  // A chunk's host sum waits for every device's copy of that chunk.
  std::vector<OpId> second_copies;
  for (int32_t w = 0; w < 4; ++w) second_copies.push_back(ids_of(plan, OpKind::kCopyToHost, w, 1).at(1));
  EXPECT_EQ(plan.ops[sums[1]].deps, second_copies);
}

TEST(CgdpPlan, OneWorkerNeitherCopiesNorSynchronizes) {
  // Seed 003 Table 2: 1-GPU CGDP is 1-GPU Caffe.
  const Plan plan = generate("cgdp", three_layers(), simple_cluster(1, 4), {{"workers", "1"}}, 1);
  EXPECT_TRUE(ids_of(plan, OpKind::kCopyToHost).empty());
  EXPECT_TRUE(ids_of(plan, OpKind::kHostAccumulate).empty());
  double backward_s = 0;
  for (OpId id : ids_of(plan, OpKind::kBackward)) backward_s += plan.ops[id].work_s;
  EXPECT_NEAR(backward_s, 3e-3, 1e-15);
}

TEST(CgdpPlan, MachinesSumLocallyThenAllReduceBetweenTheirHosts) {
  // 2 × 2: hosts on workers 0 and 2, each summing its 2 devices' copies,
  // then an AllReduce of the chunk between them; copies back wait for it.
  const Plan plan = generate("cgdp", three_layers(), simple_cluster(2, 2), {}, 1);
  ASSERT_EQ(plan.groups, (std::vector<std::vector<int32_t>>{{0, 2}}));
  for (int32_t host : {0, 2}) {
    const std::vector<OpId> sums = ids_of(plan, OpKind::kHostAccumulate, host);
    const std::vector<OpId> allreduce = ids_of(plan, OpKind::kAllReduce, host);
    ASSERT_EQ(sums.size(), 2u);
    ASSERT_EQ(allreduce.size(), 2u);
    EXPECT_DOUBLE_EQ(plan.ops[sums[0]].bytes, 2 * 8e6);
    EXPECT_DOUBLE_EQ(plan.ops[allreduce[0]].bytes, 8e6);
    EXPECT_EQ(plan.ops[allreduce[0]].deps, std::vector<OpId>{sums[0]});
    EXPECT_EQ(plan.ops[allreduce[0]].algorithm, CollectiveAlgorithm::kRing);
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kCopyToDevice, host + 1).at(1)].deps, std::vector<OpId>{allreduce[1]});
  }
  EXPECT_TRUE(ids_of(plan, OpKind::kHostAccumulate, 1).empty());
}

TEST(CgdpPlan, ExplicitChunksAreTakenAsGiven) {
  const Plan plan = generate("cgdp", three_layers(), simple_cluster(1, 2), {{"chunks", "0-2"}}, 1);
  EXPECT_EQ(ids_of(plan, OpKind::kCopyToHost, 0).size(), 1u);
  EXPECT_DOUBLE_EQ(plan.ops[ids_of(plan, OpKind::kCopyToHost, 0).at(0)].bytes, 12e6);
  EXPECT_EQ(plan.config["chunks"], nlohmann::json::parse("[[0,2]]"));
}

TEST(CgdpPlan, SimulatedIterationEqualsTheFlowShopOnOneMachine) {
  // Cgdp's cost tests derive 8.26 ms with chunk_size 1 and 11.44 ms with one
  // chunk on 1 × 4; each stream of the plan is one resource of that flow shop.
  const Cluster four = simple_cluster(1, 4);
  const std::vector<std::pair<testing_fixtures::Settings, double>> cases = {{{}, 8.26e-3},
                                                                            {{{"chunks", "0-2"}}, 11.44e-3}};
  for (const auto& [settings, expected_s] : cases) {
    EXPECT_NEAR(testing_fixtures::analytic_iteration_s("cgdp", three_layers(), four, settings), expected_s, 1e-12);
    const Plan plan = generate("cgdp", three_layers(), four, settings, 8);
    EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, four), expected_s, 0.01 * expected_s);
  }
}

TEST(CgdpPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {{"workers", "3"}, {"chunk_size", "2"}};
  EXPECT_EQ(generate("cgdp", three_layers(), simple_cluster(1, 4), settings).config,
            testing_fixtures::run_strategy("cgdp", three_layers(), simple_cluster(1, 4), settings).config);
  EXPECT_THROW(generate("cgdp", three_layers(), simple_cluster(1, 4), {{"chunks", "0-2"}, {"chunk_size", "1"}}),
               InputError);
  EXPECT_THROW(generate("cgdp", three_layers(), simple_cluster(1, 4), {{"chunk_size", "3"}}), InputError);
  EXPECT_THROW(generate("cgdp", three_layers(), simple_cluster(1, 4), {{"algorithm", "ring"}}), InputError);
}

TEST(CgdpPlan, ValidatesOnFixturesAndEveryPreset) {
  testing_fixtures::expect_plans_everywhere("cgdp");
  testing_fixtures::expect_plans_everywhere("cgdp", {{"chunk_size", "2"}});
}

}  // namespace
}  // namespace trainsim
