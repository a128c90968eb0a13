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

// Interleaved over two chunks on two devices, M = 4 (Megatron-LM's order):
// device 0 warms up with 2·(2 − 0 − 1) + (2 − 1)·2 = 4 forwards (chunk 0's
// micro-batches 0, 1, chunk 1's 0, 1), device 1 with 2; chunk c of device d
// is virtual stage 2c + d.
TEST(OneFOneBPlan, InterleavedChunksRunInMegatronsOrder) {
  Cluster cluster = simple_cluster(1, 2);
  const Plan plan =
      generate("1f1b", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), cluster, {{"microbatches", "4"}, {"chunks", "2"}}, 1);
  const auto order = [&plan](int32_t worker) {
    std::string text;
    for (const OpId id : plan.streams[worker][static_cast<size_t>(StreamKind::kCompute)]) {
      const Op& op = plan.ops[id];
      if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
        text += std::string(op.kind == OpKind::kForward ? "F" : "B") + std::to_string(op.stage) + "." +
                std::to_string(op.microbatch) + " ";
      }
    }
    return text;
  };
  EXPECT_EQ(order(0), "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3 ");
  EXPECT_EQ(order(1), "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3 ");
}

// The simulator prices the interleaved bubble as the closed form does:
// two devices of two chunks, each chunk a layer of F 1, B 2 ms a mini-batch,
// M = 4, nothing else: a device's micro-batch step 2 × 3/4 = 1.5 ms, so
// (M + (K − 1)/v)·1.5 = 4.5 × 1.5 = 6.75 ms, where one chunk a device takes
// (M + K − 1)·1.5 = 7.5 ms.
TEST(OneFOneBPlan, InterleavingShrinksTheBubbleByTheChunks) {
  Cluster cluster = simple_cluster(1, 2);
  cluster.intra_link.latency_s = 0;
  cluster.intra_link.bandwidth_bytes_per_s = 1e18;
  cluster.collective.sync_s = 0;
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  const Plan interleaved = generate("1f1b", profile, cluster, {{"microbatches", "4"}, {"chunks", "2"}}, 4);
  EXPECT_NEAR(simulate_plan(interleaved, cluster, SimOptions{}).iteration_s, 6.75e-3, 1e-9);
  const Plan plain = generate("1f1b", profile, cluster, {{"microbatches", "4"}}, 4);
  EXPECT_NEAR(simulate_plan(plain, cluster, SimOptions{}).iteration_s, 7.5e-3, 1e-9);
}

}  // namespace
}  // namespace trainsim
