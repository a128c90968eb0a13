// `pipedream-sync` plan: PipeDream's 1F1B order cut into time units by a
// barrier of all workers (seed 000 §3.1, Figure 6a), one task per worker per
// unit, two units per mini-batch in steady state.
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

Plan four_stage_plan(const std::string& id, int32_t iterations) {
  return generate(id, chain_profile(4, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4), {{"replicate", "false"}},
                  iterations);
}

// The time unit of each compute op: the barriers before it on its worker.
std::vector<int32_t> units_of(const Plan& plan) {
  std::vector<int32_t> unit(plan.ops.size(), -1);
  for (int32_t w = 0; w < static_cast<int32_t>(plan.workers.size()); ++w) {
    int32_t barriers = 0;
    for (OpId id : plan.streams[w][static_cast<int>(StreamKind::kCompute)]) {
      unit[id] = barriers;
      if (plan.ops[id].kind == OpKind::kBarrier) ++barriers;
    }
  }
  return unit;
}

TEST(PipedreamSyncPlan, TasksRunInTheUnitsOfSeed000Figure6a) {
  // S = 4 stages, 8 mini-batches. Stage k forwards mini-batch i in unit k + i
  // while it admits (i < S − k), then every other unit, 2i + k; its backward
  // of i runs in unit 2S − 1 − k + 2i: the last stage right after the
  // forward, each earlier stage one unit after the stage above.
  const Plan plan = four_stage_plan("pipedream-sync", 8);
  const std::vector<int32_t> unit = units_of(plan);
  for (OpId id = 0; id < static_cast<OpId>(plan.ops.size()); ++id) {
    const Op& op = plan.ops[id];
    const int32_t k = op.stage, i = op.iteration;
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(unit[id], i < 4 - k ? k + i : 2 * i + k) << "F" << i << " stage " << k;
    }
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(unit[id], 7 - k + 2 * i) << "B" << i << " stage " << k;
    }
  }
  EXPECT_EQ(schedule_text(plan, 0),
            "F0 | F1 | F2 | F3 | | | | B0 U | F4 | B1 U | F5 | B2 U | F6 | B3 U | F7 | B4 U | | B5 U | | B6 U | | "
            "B7 U |");
}

TEST(PipedreamSyncPlan, EveryWorkerClosesEveryUnitWithOneBarrierOfAll) {
  // The last unit is stage 0's B7, unit 2S − 1 + 2·7 = 21: 22 barriers on each
  // worker, all of one group holding every worker; at most one task per unit.
  const Plan plan = four_stage_plan("pipedream-sync", 8);
  const std::vector<int32_t> unit = units_of(plan);
  for (int32_t w = 0; w < 4; ++w) {
    const auto barriers = testing_fixtures::ids_of(plan, OpKind::kBarrier, w);
    ASSERT_EQ(barriers.size(), 22u);
    for (OpId id : barriers) EXPECT_EQ(plan.groups[plan.ops[id].group], (std::vector<int32_t>{0, 1, 2, 3}));
    std::vector<int32_t> tasks_in_unit(22, 0);
    for (OpId id : plan.streams[w][static_cast<int>(StreamKind::kCompute)]) {
      const OpKind kind = plan.ops[id].kind;
      if (kind == OpKind::kForward || kind == OpKind::kBackward) ++tasks_in_unit[unit[id]];
    }
    for (int32_t n : tasks_in_unit) EXPECT_LE(n, 1);
  }
}

TEST(PipedreamSyncPlan, KeepsPipedreamsOrderAndWeightVersions) {
  // Without the barriers each worker's program is `pipedream`'s, and every
  // forward and backward reads the version `pipedream` gives it.
  const Plan sync = four_stage_plan("pipedream-sync", 8);
  const Plan async = four_stage_plan("pipedream", 8);
  for (int32_t w = 0; w < 4; ++w) {
    std::vector<std::pair<std::string, int32_t>> a, b;
    for (const Op* op : testing_fixtures::stream_ops(sync, w, StreamKind::kCompute)) {
      if (op->kind != OpKind::kBarrier)
        a.push_back({op_kind_name(op->kind) + std::to_string(op->iteration), op->weight_version});
    }
    for (const Op* op : testing_fixtures::stream_ops(async, w, StreamKind::kCompute)) {
      b.push_back({op_kind_name(op->kind) + std::to_string(op->iteration), op->weight_version});
    }
    EXPECT_EQ(a, b) << "worker " << w;
  }
}

TEST(PipedreamSyncPlan, BarrierWaitsForTheUnitsTransfersToLand) {
  // Each Send is issued by a task of some unit; the barrier closing that unit
  // on the sender depends on it, so the receiver finds its input next unit.
  const Plan plan = four_stage_plan("pipedream-sync", 8);
  const std::vector<int32_t> unit = units_of(plan);
  for (OpId id : testing_fixtures::ids_of(plan, OpKind::kSend)) {
    const Op& send = plan.ops[id];
    const int32_t task_unit = unit[send.deps[0]];
    const OpId closing = testing_fixtures::ids_of(plan, OpKind::kBarrier, send.worker)[task_unit];
    const auto& deps = plan.ops[closing].deps;
    EXPECT_NE(std::find(deps.begin(), deps.end(), id), deps.end());
  }
}

TEST(PipedreamSyncPlan, ReplicasUpdateTogetherInTheUnitTheirRoundCompletes) {
  // Stages 0-1 (2 replicas) and 2-2: worker 0 runs B0 in unit 3 but its round
  // (mini-batches 0, 1) completes with worker 1's B1 in unit 5, where both
  // AllReduce and update: forwards up to unit 5 (F0-F4) read version 0, F5
  // (unit 6) and F6 (unit 8) version 1, F7 (unit 10, after round 1's update
  // in unit 9) version 2.
  const Plan plan = generate("pipedream-sync", chain_profile(3, 1e-3, 2e-3, 1e6, 1e6), simple_cluster(1, 3),
                             {{"stages", "0-1,2-2"}, {"replicas", "2,1"}}, 8);
  EXPECT_EQ(schedule_text(plan, 0), "F0 | F2 | | B0 | F4 | AU | | B2 | F6 | AU | | B4 | | AU | | B6 | | AU |");
  EXPECT_EQ(schedule_text(plan, 1), "F1 | F3 | | | | B1 AU | F5 | | | B3 AU | F7 | | | B5 AU | | | | B7 AU |");
  std::vector<int32_t> versions(8, -1);
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kForward && op.stage == 0) versions[op.iteration] = op.weight_version;
  }
  EXPECT_EQ(versions, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 2}));
}

TEST(PipedreamSyncPlan, MemoryIsTheCostModelsWeightStashingMemory) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6);
  const Prediction p = testing_fixtures::run_strategy("pipedream-sync", profile, simple_cluster(1, 4));
  const Plan plan = generate("pipedream-sync", profile, simple_cluster(1, 4), {}, 8);
  for (int32_t w = 0; w < 4; ++w) {
    EXPECT_DOUBLE_EQ(testing_fixtures::program_peak_bytes(plan, w), p.memory[w].total_bytes()) << w;
  }
}

TEST(PipedreamSyncPlan, ResolvesTheCostModelsSettingsAndRejectsOthers) {
  const Profile profile = chain_profile(3, 1e-3, 2e-3, 1e6, 1e6);
  const Settings settings = {{"stages", "0-1,2-2"}, {"replicas", "2,1"}};
  EXPECT_EQ(generate("pipedream-sync", profile, simple_cluster(1, 3), settings).config,
            testing_fixtures::run_strategy("pipedream-sync", profile, simple_cluster(1, 3), settings).config);
  EXPECT_THROW(generate("pipedream-sync", profile, simple_cluster(1, 3), {{"spectrain", "true"}}), InputError);
  EXPECT_THROW(generate("pipedream-sync", profile, simple_cluster(1, 3), {{"replicas", "2,2"}}), InputError);
}

TEST(PipedreamSyncPlan, ValidatesOnZooModelsForEveryPreset) {
  testing_fixtures::expect_pipeline_plans_everywhere("pipedream-sync");
  testing_fixtures::expect_pipeline_plans_everywhere("pipedream-sync", {{"stages", "2"}, {"replicas", "2,1"}});
}

TEST(PipedreamSyncPlan, SimulatedMiniBatchCostsTwoUnitsOfTheSlowestTasks) {
  // Negligible activations; stages 0-0, 1-2, 3-3 (F 1, 2, 1 ms; B 2, 4, 2 ms;
  // U = 5 × weights / 100 GB/s = 0.05, 0.1, 0.05 ms). Stages 0 and 2 forward
  // while stage 1 runs B + U = 4.1 ms; then they run B + U = 2.05 ms while
  // stage 1 forwards 2 ms: 6.15 ms per mini-batch (docs/equations.md §5), and a
  // barrier at t_sync = 20 us after each unit: 6.19 ms.
  testing_fixtures::expect_negligible_transfer_iteration("pipedream-sync", 3, {{"stages", "0-0,1-2,3-3"}}, 30, 6.19e-3);
}

}  // namespace
}  // namespace trainsim
