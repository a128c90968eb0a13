// `pipedream` plan: 1F1B order after the NOAM warm-up, replicas taking
// mini-batches in turn and synchronising per round, weight stashing, boundary
// transfers, memory and settings as the cost model has them.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/pipeline_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::generate;
using testing_fixtures::schedule_text;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

// 4 layers of F 1 ms, B 2 ms, 1 MB weights, 4 MB activations; one per stage on 4 devices.
Plan four_stage_plan(int32_t iterations) {
  return generate("pipedream", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4), {{"replicate", "false"}},
                  iterations);
}

TEST(PipedreamPlan, EachStageAdmitsOneMiniBatchPerStageFromItThenAlternates) {
  // Stage s of S = 4 runs S − s forwards before its first backward (NOAM,
  // docs/equations.md §4), then one backward (and its update), one forward, until
  // the forwards run out and the backwards drain.
  const Plan plan = four_stage_plan(8);
  EXPECT_EQ(schedule_text(plan, 0), "F0 F1 F2 F3 B0 U F4 B1 U F5 B2 U F6 B3 U F7 B4 U B5 U B6 U B7 U");
  EXPECT_EQ(schedule_text(plan, 1), "F0 F1 F2 B0 U F3 B1 U F4 B2 U F5 B3 U F6 B4 U F7 B5 U B6 U B7 U");
  EXPECT_EQ(schedule_text(plan, 3), "F0 B0 U F1 B1 U F2 B2 U F3 B3 U F4 B4 U F5 B5 U F6 B6 U F7 B7 U");
}

TEST(PipedreamPlan, ReplicasTakeMiniBatchesInTurnAndAdmitNoamEach) {
  // Stages 0-1 on 2 replicas and 2-2 on one: NOAM = ⌈3 workers / 2⌉ = 2, so
  // each input replica admits 2 of its own mini-batches (worker 0 the even,
  // worker 1 the odd). Each round (mini-batches 2t, 2t+1) ends with an
  // AllReduce of the stage's 2 MB of gradients on both replicas, then the update.
  const Plan plan = generate("pipedream", chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3),
                             {{"stages", "0-1,2-2"}, {"replicas", "2,1"}}, 8);
  EXPECT_EQ(schedule_text(plan, 0), "F0 F2 B0 AU F4 B2 AU F6 B4 AU B6 AU");
  EXPECT_EQ(schedule_text(plan, 1), "F1 F3 B1 AU F5 B3 AU F7 B5 AU B7 AU");
  EXPECT_EQ(schedule_text(plan, 2), "F0 B0 U F1 B1 U F2 B2 U F3 B3 U F4 B4 U F5 B5 U F6 B6 U F7 B7 U");
  const auto reduces = testing_fixtures::ids_of(plan, OpKind::kAllReduce);
  ASSERT_EQ(reduces.size(), 8u);  // 4 rounds × 2 replicas
  for (OpId id : reduces) {
    const Op& op = plan.ops[id];
    EXPECT_EQ(plan.groups[op.group], (std::vector<int32_t>{0, 1}));
    EXPECT_DOUBLE_EQ(op.bytes, 2e6);
    EXPECT_EQ(op.stream, StreamKind::kSend);
  }
}

TEST(PipedreamPlan, ReplicaWithoutAMiniBatchInTheLastRoundStillJoinsIt) {
  // 7 mini-batches: round 3 holds mini-batch 6 only (worker 0); worker 1 joins
  // its AllReduce and update after its last backward so both keep one version.
  const Plan plan = generate("pipedream", chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3),
                             {{"stages", "0-1,2-2"}, {"replicas", "2,1"}}, 7);
  EXPECT_EQ(schedule_text(plan, 0), "F0 F2 B0 AU F4 B2 AU F6 B4 AU B6 AU");
  EXPECT_EQ(schedule_text(plan, 1), "F1 F3 B1 AU F5 B3 AU B5 AU AU");
}

TEST(PipedreamPlan, BackwardReadsTheVersionItsForwardStashed) {
  // Stage k has applied one update per backward; before its forward of
  // mini-batch i >= S − k it has run the backwards of 0 .. i − (S − k), so
  // it reads version i − (S − 1 − k) (0 before); the backward of i reads the
  // same stashed version, and the update after B(i) reads version i.
  const Plan plan = four_stage_plan(8);
  for (const Op& op : plan.ops) {
    const int32_t lag = 4 - 1 - op.stage;
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.weight_version, std::max(0, op.iteration - lag)) << op_kind_name(op.kind) << op.iteration;
    } else if (op.kind == OpKind::kUpdate) {
      EXPECT_EQ(op.weight_version, op.iteration);
    }
  }
}

TEST(PipedreamPlan, TransfersCarryTheBoundaryBytesBothWays) {
  // a → b → c → d with a skip edge a → d; activations 1, 2, 4, 8 MB. Stages
  // a-b and c-d: the boundary carries b's output (for c) and a's (for d),
  // 3 MB, as activations forward and as their gradients back.
  Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  for (int l = 0; l < 4; ++l) profile.layers[l].activation_bytes = 1e6 * (1 << l);
  profile.layers[3].inputs = {"l2", "l0"};
  const Plan plan = generate("pipedream", profile, simple_cluster(1, 2), {{"stages", "0-1,2-3"}}, 4);
  const auto sends = testing_fixtures::ids_of(plan, OpKind::kSend);
  ASSERT_EQ(sends.size(), 8u);  // per mini-batch: activations 0 → 1, gradients 1 → 0
  for (OpId id : sends) EXPECT_DOUBLE_EQ(plan.ops[id].bytes, 3e6);
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
    const Op* recv = testing_fixtures::recv_of(plan, op);
    const bool receives = (op.kind == OpKind::kForward) == (op.stage == 1);
    ASSERT_EQ(recv != nullptr, receives) << op_kind_name(op.kind) << " on stage " << op.stage;
    if (!receives) continue;
    const Op& send = testing_fixtures::send_of(plan, *recv);
    EXPECT_EQ(plan.ops[send.deps[0]].kind, op.kind);  // sent by the same pass of the other stage
    EXPECT_EQ(send.iteration, op.iteration);
    EXPECT_EQ(send.worker, 1 - op.worker);
  }
}

TEST(PipedreamPlan, MemoryIsTheCostModelsWeightStashingMemory) {
  // 2 stages of 2 layers (1 MB weights, 4 MB activations each). Stage 0: 3 ×
  // 2 MB + one stashed 2 MB = 8 MB static; 2 mini-batches in flight × 8 MB
  // = 24 MB at the peak. Stage 1: 6 MB static + 1 × (8 MB + the 4 MB input) = 18 MB.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  const Plan plan = generate("pipedream", profile, simple_cluster(1, 2), {{"replicate", "false"}}, 6);
  EXPECT_DOUBLE_EQ(plan.workers[0].static_bytes, 8e6);
  EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, 0), 24e6);
  EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, 1), 18e6);
  // With replication and a layer's workspace, still the cost model's per device.
  Profile with_workspace = chain_profile(5, 1e-3, 2e-3, 1e6, 4e6);
  with_workspace.layers[1].workspace_bytes = 3e6;
  const Settings settings = {{"stages", "0-1,2-2,3-4"}, {"replicas", "2,1,1"}};
  const Plan replicated = generate("pipedream", with_workspace, simple_cluster(1, 4), settings, 9);
  const Prediction p = testing_fixtures::run_strategy("pipedream", with_workspace, simple_cluster(1, 4), settings);
  ASSERT_EQ(p.memory.size(), replicated.workers.size());
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(replicated, w), p.memory[w].total_bytes()) << w;
  }
}

TEST(PipedreamPlan, ResolvesTheCostModelsSettingsAndRejectsOthers) {
  const Profile profile = chain_profile(3, 1e-3, 2e-3, 1e6, 1e6);
  const Settings settings = {{"stages", "0-1,2-2"}, {"replicas", "2,1"}};
  const Plan plan = generate("pipedream", profile, simple_cluster(1, 3), settings);
  EXPECT_EQ(plan.config, testing_fixtures::run_strategy("pipedream", profile, simple_cluster(1, 3), settings).config);
  EXPECT_EQ(plan.workers.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.samples_per_iteration, 32);
  EXPECT_THROW(generate("pipedream", profile, simple_cluster(1, 3), {{"microbatches", "4"}}), InputError);
  EXPECT_THROW(generate("pipedream", profile, simple_cluster(1, 3), {{"stages", "4"}}), InputError);
  EXPECT_THROW(generate("pipedream", profile, simple_cluster(1, 3), {}, 0), InputError);
}

TEST(PipedreamPlan, ValidatesOnZooModelsForEveryPreset) {
  testing_fixtures::expect_pipeline_plans_everywhere("pipedream");
  // Replicated stages (every preset has at least 3 devices).
  testing_fixtures::expect_pipeline_plans_everywhere("pipedream", {{"stages", "2"}, {"replicas", "2,1"}});
  testing_fixtures::expect_pipeline_plans_everywhere("pipedream", {{"stages", "2"}, {"replicas", "1,2"}});
}

TEST(PipedreamPlan, SimulatedOneFOneBMatchesTheClosedForm) {
  // Negligible activations: one mini-batch per slowest stage, here stage 1-2
  // of F 2 + B 4 + U 5 × 2 MB / 100 GB/s = 6.1 ms (docs/equations.md §5).
  testing_fixtures::expect_negligible_transfer_iteration("pipedream", 3, {{"stages", "0-0,1-2,3-3"}}, 30, 6.1e-3);
}

}  // namespace
}  // namespace trainsim
