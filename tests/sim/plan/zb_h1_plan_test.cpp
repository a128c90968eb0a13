// `zb-h1` plan (Qi et al. 2023, ZB-H1): 1F1B's forwards and input-gradient
// backwards (B), each stage k holding back up to k weight-gradient passes
// (W), the rest after its last B; every op of mini-batch i reads version i.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/error.hpp"
#include "sim/cost/zero_bubble.hpp"
#include "sim/des/engine.hpp"
#include "tests/sim/plan/pipeline_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::generate;
using testing_fixtures::schedule_text;
using testing_fixtures::simple_cluster;

Plan four_stage_plan(int32_t microbatches, int32_t iterations, const std::string& share = "0.5") {
  return generate("zb-h1", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4),
                  {{"microbatches", std::to_string(microbatches)}, {"weight_share", share}}, iterations);
}

TEST(ZbH1Plan, LaterStagesHoldBackTheirWeightGradients) {
  const Plan plan = four_stage_plan(5, 1);
  // Stage 0 holds none back: each W right after its B.
  EXPECT_EQ(schedule_text(plan, 0), "F0.0 F0.1 F0.2 F0.3 B0.0 W0.0 F0.4 B0.1 W0.1 B0.2 W0.2 B0.3 W0.3 B0.4 W0.4 U |");
  EXPECT_EQ(schedule_text(plan, 1), "F0.0 F0.1 F0.2 B0.0 F0.3 B0.1 W0.0 F0.4 B0.2 W0.1 B0.3 W0.2 B0.4 W0.3 W0.4 U |");
  // Stage 3 holds back three: a W only once a fourth B is pending.
  EXPECT_EQ(schedule_text(plan, 3), "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 W0.0 F0.4 B0.4 W0.1 W0.2 W0.3 W0.4 U |");
}

TEST(ZbH1Plan, EachBackwardSplitsByTheWeightShare) {
  // A stage's backward is 2 ms / 5 micro-batches = 0.4 ms: B 0.3, W 0.1 at a share of 0.25.
  const Plan plan = four_stage_plan(5, 1, "0.25");
  int inputs = 0, weights = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kBackward) continue;
    if (op.gradients == GradientPart::kInputs) {
      ++inputs;
      EXPECT_NEAR(op.work_s, 0.3e-3, 1e-12);
    } else {
      ASSERT_EQ(op.gradients, GradientPart::kWeights);
      ++weights;
      EXPECT_NEAR(op.work_s, 0.1e-3, 1e-12);
      EXPECT_EQ(op.free_bytes, op.alloc_bytes);  // its workspace only: the B freed the activations
    }
    EXPECT_EQ(op.weight_version, op.iteration);
  }
  EXPECT_EQ(inputs, 4 * 5);
  EXPECT_EQ(weights, 4 * 5);
}

TEST(ZbH1Plan, NoStageHoldsMoreThanKMicroBatchesFromForwardToWeights) {
  for (int32_t stages : {2, 4, 8}) {
    for (int32_t m : {1, 3, 8, 20}) {
      for (int32_t k = 0; k < stages; ++k) {
        int32_t held = 0, most = 0, forwards = 0, inputs = 0, weights = 0;
        for (const ZeroBubbleTask& t : zb_h1_order(stages, k, m)) {
          if (t.kind == ZeroBubbleTask::kForward) {
            EXPECT_EQ(t.microbatch, forwards++);
          }
          if (t.kind == ZeroBubbleTask::kInput) {
            EXPECT_EQ(t.microbatch, inputs++);
          }
          if (t.kind == ZeroBubbleTask::kWeights) {
            EXPECT_EQ(t.microbatch, weights++);
            EXPECT_LE(weights, inputs);  // a W after its B
          }
          held = forwards - weights;
          most = std::max(most, held);
        }
        EXPECT_EQ(forwards, m);
        EXPECT_EQ(weights, m);
        EXPECT_LE(most, stages) << stages << " stages, stage " << k << ", " << m << " micro-batches";
      }
    }
  }
}

TEST(ZbH1Plan, TheSimulatorTakesTheZeroBubbleBubble) {
  // Four equal stages, F 1 ms and backward 2 ms a mini-batch, M = 12, B = W:
  // f = B = W = 1/12 ms; M·(f + B + W) + (K − 1)·max(f + B − W, f, B) =
  // 3 + 3/12 = 3.25 ms, where 1f1b takes (M + K − 1)·3/12 = 3.75 ms.
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  const Plan plan = generate("zb-h1", profile, cluster, {{"microbatches", "12"}}, 4);
  EXPECT_NEAR(simulate_plan(plan, cluster, SimOptions{}).iteration_s, 3.25e-3, 1e-7);  // whole ns an op
  const Plan one = generate("1f1b", profile, cluster, {{"microbatches", "12"}}, 4);
  EXPECT_NEAR(simulate_plan(one, cluster, SimOptions{}).iteration_s, 3.75e-3, 1e-9);
}

TEST(ZbH1Plan, AWeightShareOutsideZeroToOneIsRefused) {
  for (const char* share : {"0", "1", "1.5"}) {
    try {
      four_stage_plan(5, 1, share);
      ADD_FAILURE() << share;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--set weight_share"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace trainsim
