// A transformer's whole 3-D job as a plan: every GPU a worker in Megatron-LM's
// rank order, the tensor-parallel all-reduces of a pass as one op standing
// for them all, the data-parallel all-reduce after the drain (ZeRO-2's and
// -3's scatters and gathers beside the compute); simulated, it takes the
// closed form's iteration where nothing contends.
#include "sim/plan/transformer_plan.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/error.hpp"
#include "sim/cost/transformer_memory.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {
namespace {

const GpuMachine& a100() { return find_gpu_machine("dgx-a100", "machine"); }

TransformerTraining megatron_39b(int64_t data) {
  TransformerTraining t;
  t.tensor = 8;
  t.pipeline = 2;
  t.data = data;
  t.recompute = Recompute::full;
  return t;
}

TEST(TransformerJob, EveryGpuIsAWorkerInMegatronsRankOrder) {
  const TransformerConfig& c = find_transformer_config("megatron-39.1b", "model");
  const TransformerTraining t = megatron_39b(4);
  const TransformerJob job = transformer_job(c, t, 64, a100(), {}, 1);  // 16 micro-batches
  ASSERT_EQ(job.plan.workers.size(), 64u);
  EXPECT_EQ(job.cluster.machines, 8);
  EXPECT_EQ(job.cluster.devices_per_machine, 8);
  EXPECT_DOUBLE_EQ(job.cluster.inter_link.bandwidth_bytes_per_s, 8 * 25e9 * 0.8);  // a machine's NICs at 80%
  const double bsh = 2.0 * 2048 * 8192;  // a micro-batch's b·s·h 16-bit values
  std::set<std::vector<int32_t>> tensor_groups, data_groups;
  int forward_all_reduces = 0;
  for (const Op& op : job.plan.ops) {
    if (op.kind == OpKind::kSend) {
      EXPECT_DOUBLE_EQ(op.bytes, bsh / 8);  // split over the group
    }
    if (op.kind != OpKind::kAllReduce) continue;
    const std::vector<int32_t>& members = job.plan.groups[static_cast<size_t>(op.group)];
    if (op.microbatch >= 0) {
      // 24 layers a stage, two all-reduces each a pass: 48 in the forward,
      // 96 in the backward with its recomputed forward.
      EXPECT_TRUE(op.repeat == 48 || op.repeat == 96) << op.repeat;
      EXPECT_DOUBLE_EQ(op.bytes, op.repeat * bsh);
      forward_all_reduces += op.repeat == 48 ? 1 : 0;
      tensor_groups.insert(members);
      EXPECT_EQ(members.back() - members.front(), 7);  // eight consecutive ranks: one machine
    } else {
      data_groups.insert(members);
      EXPECT_EQ(members[1] - members[0], 8);  // the same tensor rank of the next replica
      const int64_t stage = op.stage;
      const double params = stage == 0 ? first_stage_params(c, t) : 24 * block_params(c, 8);
      EXPECT_DOUBLE_EQ(op.bytes, 2 * params);
    }
  }
  EXPECT_EQ(forward_all_reduces, 64 * 16);
  EXPECT_EQ(tensor_groups.size(), 8u);  // 2 stages × 4 replicas
  EXPECT_EQ(data_groups.size(), 16u);   // 2 stages × 8 tensor ranks
}

TEST(TransformerJob, SimulatedItTakesTheClosedFormsIteration) {
  const TransformerConfig& c = find_transformer_config("megatron-39.1b", "model");
  for (const bool zero_bubble : {false, true}) {
    TransformerTraining t = megatron_39b(4);
    t.zero_bubble = zero_bubble;
    t.zero_stage = 1;
    const TransformerJob job = transformer_job(c, t, 64, a100(), {}, 2);
    const double closed = transformer_step(c, t, 64, a100()).iteration_s;
    EXPECT_NEAR(simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s / closed, 1.0, 0.02) << zero_bubble;
  }
  // Interleaved over two chunks a device (12 layers a chunk, Megatron-LM's
  // order): a chunk's pass all-reduces its layers' 24, and the pipeline
  // within 2% of the closed form too.
  TransformerTraining interleaved = megatron_39b(4);
  interleaved.virtual_stages = 2;
  const TransformerJob chunked = transformer_job(c, interleaved, 64, a100(), {}, 1);
  for (const Op& op : chunked.plan.ops) {
    if (op.kind == OpKind::kAllReduce && op.microbatch >= 0) {
      EXPECT_TRUE(op.repeat == 24 || op.repeat == 48) << op.repeat;
    }
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.last_layer - op.first_layer, 11);
    }
  }
  EXPECT_NEAR(simulate_plan(chunked.plan, chunked.cluster, SimOptions{}).iteration_s /
                  transformer_step(c, interleaved, 64, a100()).iteration_s,
              1.0, 0.02);
  // Tensor-parallel groups of 4: two replicas of a stage a machine, whose
  // four data-parallel rings share its NICs at twice a GPU's NIC each.
  TransformerTraining t = megatron_39b(8);
  t.tensor = 4;
  const TransformerJob job = transformer_job(c, t, 64, a100(), {}, 2);
  const double closed = transformer_step(c, t, 64, a100()).iteration_s;
  EXPECT_NEAR(simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s / closed, 1.0, 0.02);
}

// ZeRO-2 and -3 (FSDP) on Megatron's 1.7B over 32 GPUs: each layer's
// reduce-scatter (and ZeRO-3's gathers) beside the compute of the layer
// before, as reduce-scatter and all-gather ops standing for a pass's
// layers; simulated, the closed form's iteration whether the compute hides
// the collectives (the links at 80%) or the collectives set the pace (at 10%).
TEST(TransformerJob, ShardedDataParallelismGathersAndScattersBesideTheCompute) {
  const TransformerConfig& c = find_transformer_config("megatron-1.7b", "model");
  for (const int stage : {2, 3}) {
    for (const double links : {0.8, 0.1}) {
      TransformerTraining t;
      t.data = 32;
      t.zero_stage = stage;
      StepAssumptions a;
      a.link_efficiency = links;
      const TransformerJob job = transformer_job(c, t, 512, a100(), a, 1);
      int gathers = 0, scatters = 0, all_reduces = 0;
      for (const Op& op : job.plan.ops) {
        gathers += op.kind == OpKind::kAllGather ? 1 : 0;
        scatters += op.kind == OpKind::kReduceScatter ? 1 : 0;
        all_reduces += op.kind == OpKind::kAllReduce ? 1 : 0;
      }
      // A pass's scatter and the first layer's after it, each micro-batch;
      // ZeRO-3's first layer's and a pass's gathers before the forward and
      // a pass's before the backward, ZeRO-2's one of the updated weights.
      EXPECT_EQ(scatters, 32 * 16 * 2) << stage;
      EXPECT_EQ(gathers, stage == 3 ? 32 * 16 * 3 : 32) << stage;
      EXPECT_EQ(all_reduces, 0) << stage;
      const double closed = transformer_step(c, t, 512, a100(), a).iteration_s;
      EXPECT_NEAR(simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s / closed, 1.0, 0.02)
          << "ZeRO-" << stage << " at " << links;
    }
  }
}

TEST(TransformerJob, WhatItDoesNotPlanIsRefusedNamingTheSetting) {
  const TransformerConfig& c = find_transformer_config("megatron-39.1b", "model");
  const auto error_of = [&c](TransformerTraining t, int64_t batch = 64) -> std::string {
    try {
      transformer_job(c, t, batch, a100(), {}, 1);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  TransformerTraining odd = megatron_39b(4);
  odd.tensor = 2;
  odd.data = 3;  // 12 GPUs: a machine and a half
  EXPECT_NE(error_of(odd, 48).find("whole machines of 8"), std::string::npos) << error_of(odd, 48);
}

}  // namespace
}  // namespace trainsim
