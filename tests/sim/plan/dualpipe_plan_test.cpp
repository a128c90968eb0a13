// `dualpipe` plan (seed 000 §3, Algorithm 1): per time unit each stage runs
// a forward and a backward of different mini-batches, then a barrier, the
// update, a barrier; SpecTrain's predicted versions or the current ones.
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

Plan four_stage_plan(const Settings& settings = {}) {
  return generate("dualpipe", chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4), settings, 8);
}

TEST(DualpipePlan, EachUnitRunsAForwardThenABackwardOfAnOlderMiniBatch) {
  // S = 4: in unit u stage k runs F(u − k) then B(u − (2S − 2 − k)) (Figure
  // 6b); the last stage runs F(i) and B(i) in one unit, stage 0 the backward
  // of i 2S − 2 = 6 units after its forward. Each unit: tasks, barrier,
  // update (where a backward ran), barrier; 8 + 2S − 2 = 14 units.
  const Plan plan = four_stage_plan();
  EXPECT_EQ(schedule_text(plan, 0),
            "F0 | | F1 | | F2 | | F3 | | F4 | | F5 | | F6 B0 | U | F7 B1 | U | B2 | U | B3 | U | B4 | U | B5 | U | "
            "B6 | U | B7 | U |");
  EXPECT_EQ(schedule_text(plan, 3),
            "| | | | | | F0 B0 | U | F1 B1 | U | F2 B2 | U | F3 B3 | U | F4 B4 | U | F5 B5 | U | F6 B6 | U | F7 B7 | U "
            "| | | | | | |");
  for (int32_t w = 0; w < 4; ++w) EXPECT_EQ(testing_fixtures::ids_of(plan, OpKind::kBarrier, w).size(), 28u);
}

TEST(DualpipePlan, SpecTrainReadsTheVersionItsMiniBatchCompletesWith) {
  // Stage k has applied max(0, u − (2S − 2 − k)) updates when unit u starts
  // (one per backward, from unit 2S − 2 − k on). The forward of i (unit i + k)
  // predicts s = 2S − k − 2 versions ahead, the backward (unit i + 2S − 2 − k)
  // s = k (eqs. 5-6): both read version i + k once the stage updates every
  // unit; before that the forward reads 0 + s.
  const Plan plan = four_stage_plan();
  for (const Op& op : plan.ops) {
    const int32_t k = op.stage, i = op.iteration;
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.weight_version, std::max(0, i + 2 * k - 6) + 6 - k) << "F" << i << k;
    }
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.weight_version, i + k) << "B" << i << " stage " << k;
    }
  }
}

TEST(DualpipePlan, VanillaReadsTheCurrentVersion) {
  // Without prediction the forward of i reads max(0, i + 2k − 2S + 2), its
  // backward i: 2(S − 1 − k) versions apart in steady state.
  const Plan plan = four_stage_plan({{"spectrain", "false"}});
  for (const Op& op : plan.ops) {
    const int32_t k = op.stage, i = op.iteration;
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.weight_version, std::max(0, i + 2 * k - 6)) << "F" << i << k;
    }
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.weight_version, i) << "B" << i << " stage " << k;
    }
  }
}

TEST(DualpipePlan, FirstBarrierOfAUnitWaitsForItsTransfers) {
  // Algorithm 1 line 10: the synchronisation follows both tasks and their
  // outputs (lines 21, 29), so each barrier after the tasks depends on the
  // Sends of the unit; the barrier after the update depends on none.
  const Plan plan = four_stage_plan();
  for (int32_t w = 0; w < 4; ++w) {
    const auto barriers = testing_fixtures::ids_of(plan, OpKind::kBarrier, w);
    size_t sends = 0;
    for (size_t n = 0; n < barriers.size(); ++n) {
      for (OpId d : plan.ops[barriers[n]].deps) {
        EXPECT_EQ(n % 2, 0u);
        EXPECT_EQ(plan.ops[d].kind, OpKind::kSend);
        ++sends;
      }
    }
    EXPECT_EQ(sends, testing_fixtures::ids_of(plan, OpKind::kSend, w).size());
  }
}

TEST(DualpipePlan, ReplicasUpdateTogetherWhenTheirRoundCompletes) {
  // Stages 0-1 (2 replicas) and 2-2, S = 2: stage 0 forwards i in unit i on
  // replica i mod 2 and runs its backward in unit i + 2; the round of
  // mini-batches 0, 1 completes in unit 3, where both replicas AllReduce and update.
  const Plan plan = generate("dualpipe", chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3),
                             {{"stages", "0-1,2-2"}, {"replicas", "2,1"}}, 8);
  EXPECT_EQ(schedule_text(plan, 0), "F0 | | | | F2 B0 | | | AU | F4 B2 | | | AU | F6 B4 | | | AU | B6 | | | AU |");
  EXPECT_EQ(schedule_text(plan, 1), "| | F1 | | | | F3 B1 | AU | | | F5 B3 | AU | | | F7 B5 | AU | | | B7 | AU |");
}

TEST(DualpipePlan, MemoryIsTheCostModels) {
  for (const char* spectrain : {"true", "false"}) {
    const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
    const Settings settings = {{"spectrain", spectrain}};
    const Prediction p = testing_fixtures::run_strategy("dualpipe", profile, simple_cluster(1, 4), settings);
    const Plan plan = generate("dualpipe", profile, simple_cluster(1, 4), settings, 10);
    for (int32_t w = 0; w < 4; ++w) {
      EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, w), p.memory[w].total_bytes()) << w << spectrain;
    }
  }
  // Stage 0 of 4 by hand: 2(S − 1) + 1 = 7 mini-batches' 4 MB activations
  // alive at its backward, weights, gradients, momentum and SpecTrain's 3
  // copies of its 1 MB: 28 + 6 = 34 MB.
  EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(four_stage_plan(), 0), 34e6);
}

TEST(DualpipePlan, ResolvesTheCostModelsSettingsAndRejectsOthers) {
  const Profile profile = chain_profile(3, 1e-3, 2e-3, 1e6, 1e6);
  const Settings settings = {{"stages", "0-1,2-2"}, {"replicas", "2,1"}, {"spectrain", "false"}};
  EXPECT_EQ(generate("dualpipe", profile, simple_cluster(1, 3), settings).config,
            testing_fixtures::run_strategy("dualpipe", profile, simple_cluster(1, 3), settings).config);
  EXPECT_THROW(generate("dualpipe", profile, simple_cluster(1, 3), {{"spectrain", "maybe"}}), InputError);
  EXPECT_THROW(generate("dualpipe", profile, simple_cluster(1, 3), {{"queues", "{}"}}), InputError);
}

TEST(DualpipePlan, ValidatesOnZooModelsForEveryPreset) {
  testing_fixtures::expect_pipeline_plans_everywhere("dualpipe");
  testing_fixtures::expect_pipeline_plans_everywhere("dualpipe", {{"spectrain", "false"}});
  testing_fixtures::expect_pipeline_plans_everywhere("dualpipe", {{"stages", "2"}, {"replicas", "2,1"}});
}

TEST(DualpipePlan, SimulatedUnitIsTheSlowestStagePairThenTheSlowestUpdate) {
  // Negligible activations; stages 0-0, 1-2, 3-3: F + B = 3, 6, 3 ms, U =
  // 0.05, 0.1, 0.05 ms: one mini-batch per 6 + 0.1 = 6.1 ms (docs/equations.md §5),
  // plus the unit's two barriers at t_sync = 20 us: 6.14 ms.
  testing_fixtures::expect_negligible_transfer_iteration("dualpipe", 3, {{"stages", "0-0,1-2,3-3"}, {"spectrain", "false"}},
                                                         30, 6.14e-3);
  // SpecTrain (S = 3): a prediction or a smoothing of v is 3/5 of the stage's
  // update (0.05, 0.1, 0.05 ms): 30, 60, 30 us. Stage 1 predicts for its
  // forward (s = 3) and its backward (s = 1): F + B = 6.12 ms; stage 0 3.03,
  // stage 2 3.06. Updates 0.08, 0.16, 0.08 ms: 6.12 + 0.16 + 0.04 = 6.32 ms.
  testing_fixtures::expect_negligible_transfer_iteration("dualpipe", 3, {{"stages", "0-0,1-2,3-3"}}, 30, 6.32e-3);
}

}  // namespace
}  // namespace trainsim
