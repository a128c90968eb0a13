// `gpipe` plan: M micro-batches forward through all stages, backward in
// reverse, then the flush (AllReduce of replicas, update, barrier of all);
// every op of mini-batch i reads version i.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/error.hpp"
#include "tests/sim/plan/pipeline_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::generate;
using testing_fixtures::schedule_text;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

// 4 layers of F 1 ms, B 2 ms, 1 MB weights, 4 MB activations on 4 stages.
Plan four_stage_plan(int32_t microbatches, int32_t iterations) {
  return generate("gpipe", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4),
                  {{"microbatches", std::to_string(microbatches)}}, iterations);
}

// The most ops of `kind` and iteration 0 on any chain through deps and
// stream order: the number of steps a sweep of them needs at the least.
int32_t longest_chain(const Plan& plan, OpKind kind) {
  const size_t n = plan.ops.size();
  std::vector<std::vector<OpId>> before(n);
  for (OpId id = 0; id < static_cast<OpId>(n); ++id) before[id] = plan.ops[id].deps;
  for (const auto& worker : plan.streams) {
    for (const auto& stream : worker) {
      for (size_t i = 1; i < stream.size(); ++i) before[stream[i]].push_back(stream[i - 1]);
    }
  }
  std::vector<int32_t> depth(n, -1);
  auto visit = [&](auto&& self, OpId id) -> int32_t {
    if (depth[id] >= 0) return depth[id];
    int32_t longest = 0;
    for (OpId b : before[id]) longest = std::max(longest, self(self, b));
    const Op& op = plan.ops[id];
    return depth[id] = longest + (op.kind == kind && op.iteration == 0 ? 1 : 0);
  };
  int32_t longest = 0;
  for (OpId id = 0; id < static_cast<OpId>(n); ++id) longest = std::max(longest, visit(visit, id));
  return longest;
}

TEST(GpipePlan, MicroBatchesRunForwardThenBackwardInReverseThenTheFlush) {
  const Plan plan = four_stage_plan(3, 2);
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_EQ(schedule_text(plan, w), "F0.0 F0.1 F0.2 B0.2 B0.1 B0.0 U | F1.0 F1.1 F1.2 B1.2 B1.1 B1.0 U |");
  }
}

TEST(GpipePlan, EachSweepIsAChainOfMPlusKMinusOneSteps) {
  // K = 4 stages, M = 3: micro-batch m reaches stage k after m steps on stage
  // 0 and k on the others, so the longest chain of forwards holds M + K − 1 =
  // 6 of them (docs/equations.md §5), and the backward sweep mirrors it.
  const Plan plan = four_stage_plan(3, 2);
  EXPECT_EQ(longest_chain(plan, OpKind::kForward), 6);
  EXPECT_EQ(longest_chain(plan, OpKind::kBackward), 6);
}

TEST(GpipePlan, EveryOpOfAMiniBatchReadsOneVersion) {
  const Plan plan = four_stage_plan(3, 3);
  for (const Op& op : plan.ops) {
    if (is_compute(op.kind)) {
      EXPECT_EQ(op.weight_version, op.iteration) << op_kind_name(op.kind);
    }
  }
}

TEST(GpipePlan, TransfersCarryTheBoundaryBytesOfOneMicroBatch) {
  // 4 MB cross each boundary per mini-batch: 1 MB per micro-batch with M = 4,
  // from the same micro-batch's forward (backward) on the neighbouring stage.
  const Plan plan = four_stage_plan(4, 2);
  const auto sends = testing_fixtures::ids_of(plan, OpKind::kSend);
  ASSERT_EQ(sends.size(), 2u * 3 * 2 * 4);  // iterations × boundaries × directions × micro-batches
  for (OpId id : sends) EXPECT_DOUBLE_EQ(plan.ops[id].bytes, 1e6);
  for (const Op& op : plan.ops) {
    const Op* recv = testing_fixtures::recv_of(plan, op);
    if (recv == nullptr || !is_compute(op.kind)) continue;
    const Op& producer = plan.ops[testing_fixtures::send_of(plan, *recv).deps[0]];
    EXPECT_EQ(producer.kind, op.kind);
    EXPECT_EQ(producer.stage, op.stage + (op.kind == OpKind::kForward ? -1 : 1));
    EXPECT_EQ(producer.iteration, op.iteration);
    EXPECT_EQ(producer.microbatch, op.microbatch);
  }
}

TEST(GpipePlan, ActivationsOfAllMicroBatchesStayUntilTheirBackward) {
  // M = 4 micro-batches of 1 MB activations each: stage 0 holds all 4 MB
  // before its first backward, plus 3 MB weights, gradients, momentum = 7 MB;
  // stage 1 also keeps the 4 × 1 MB it received: 11 MB.
  const Plan plan = four_stage_plan(4, 2);
  EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, 0), 7e6);
  EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, 1), 11e6);
  const Prediction p = testing_fixtures::run_strategy("gpipe", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6),
                                                      simple_cluster(1, 4), {{"microbatches", "4"}});
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, w), p.memory[w].total_bytes()) << w;
  }
}

TEST(GpipePlan, ReplicasShareMicroBatchesAndAllReduceBeforeTheUpdate) {
  // Stages 0-1 (2 replicas) and 2-2, M = 3: micro-batches 0 and 2 on worker
  // 0, 1 on worker 1; both AllReduce the stage's 2 MB of gradients, then update.
  const Plan plan = generate("gpipe", chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3),
                             {{"stages", "0-1,2-2"}, {"replicas", "2,1"}, {"microbatches", "3"}}, 2);
  EXPECT_EQ(schedule_text(plan, 0), "F0.0 F0.2 B0.2 B0.0 AU | F1.0 F1.2 B1.2 B1.0 AU |");
  EXPECT_EQ(schedule_text(plan, 1), "F0.1 B0.1 AU | F1.1 B1.1 AU |");
  EXPECT_EQ(schedule_text(plan, 2), "F0.0 F0.1 F0.2 B0.2 B0.1 B0.0 U | F1.0 F1.1 F1.2 B1.2 B1.1 B1.0 U |");
  for (OpId id : testing_fixtures::ids_of(plan, OpKind::kAllReduce)) {
    EXPECT_EQ(plan.groups[plan.ops[id].group], (std::vector<int32_t>{0, 1}));
    EXPECT_DOUBLE_EQ(plan.ops[id].bytes, 2e6);
  }
}

TEST(GpipePlan, ResolvesTheCostModelsSettingsAndRejectsOthers) {
  // Default M = 4·K = 8 for K = 2 stages, recorded as the cost model records it.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  const Plan plan = generate("gpipe", profile, simple_cluster(1, 2));
  EXPECT_EQ(plan.config["microbatches"], 8);
  EXPECT_EQ(plan.config, testing_fixtures::run_strategy("gpipe", profile, simple_cluster(1, 2)).config);
  EXPECT_EQ(testing_fixtures::ids_of(plan, OpKind::kForward, 0, 0).size(), 8u);
  const Settings settings = {{"stages", "0-2,3-3"}, {"replicas", "1,1"}, {"microbatches", "5"}};
  EXPECT_EQ(generate("gpipe", profile, simple_cluster(1, 2), settings).config,
            testing_fixtures::run_strategy("gpipe", profile, simple_cluster(1, 2), settings).config);
  EXPECT_THROW(generate("gpipe", profile, simple_cluster(1, 2), {{"microbatches", "33"}}), InputError);
  EXPECT_THROW(generate("gpipe", profile, simple_cluster(1, 2), {{"spectrain", "true"}}), InputError);
}

TEST(GpipePlan, ValidatesOnZooModelsForEveryPreset) {
  testing_fixtures::expect_pipeline_plans_everywhere("gpipe");
  testing_fixtures::expect_pipeline_plans_everywhere("gpipe", {{"microbatches", "1"}});
  testing_fixtures::expect_pipeline_plans_everywhere("gpipe", {{"stages", "2"}, {"replicas", "2,1"}});
}

TEST(GpipePlan, SimulatedIterationIsTwoSweepsAndTheUpdate) {
  // K = 4 equal stages, M = 4, negligible activations: micro-batch steps of
  // 0.25 ms forward and 0.5 ms backward, (M + K − 1) = 7 of each, then U =
  // 5 × 1 MB / 100 GB/s = 0.05 ms, and the barrier, t_sync = 20 us:
  // 1.75 + 3.5 + 0.05 + 0.02 = 5.32 ms.
  testing_fixtures::expect_negligible_transfer_iteration("gpipe", 4, {{"microbatches", "4"}}, 8, 5.32e-3);
}

TEST(GpipePlan, AStageThatHandsEachMicroBatchOnLosesTheHandoffAfterIt) {
  // The cost model's hand case (gpipe_test.cpp): K = 4, M = 12, F 1 and B 2 ms
  // per stage, handoff_s = 10 us: each sweep 11 × 10 us longer, 3.97 ms; the
  // first stage's forwards start 1/12 ms + 10 us apart.
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  cluster.device.handoff_s = 10e-6;
  const Plan plan = generate("gpipe", chain_profile(4, 1e-3, 2e-3, 0, 0), cluster, {{"microbatches", "12"}}, 20);
  const SimResult r = simulate_plan(plan, cluster, SimOptions{});
  EXPECT_NEAR(r.iteration_s, 3.97e-3, 1e-8);
  std::vector<SimTime> starts;
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.worker == 0 && op.kind == OpKind::kForward && op.iteration == 5) starts.push_back(r.timings[id].start_ns);
  }
  ASSERT_EQ(starts.size(), 12u);
  EXPECT_NEAR(static_cast<double>(starts[1] - starts[0]), 1e6 / 12 + 10e3, 1.0);
}

}  // namespace
}  // namespace trainsim
