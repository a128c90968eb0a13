// pipesgd plan: iterations K wide (weight versions, the delayed update and
// its dependencies), compression ops and bytes, segments.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_ops;
using testing_fixtures::stream_text;

// As PipeSgd's cost tests: two layers of 10 MB, forward 0.5 ms, backward
// 1 ms each: Σfw = 1 ms, Σbw = 2 ms, update 1 ms; on 2 × 2 machines ring
// AllReduce(20 MB) + t_sync = 3.062e-2 s.
Profile heavy_profile() { return testing_fixtures::chain_profile(2, 0.5e-3, 1e-3, 10e6, 1e6); }

TEST(PipeSgdPlan, WidthTwoAppliesEachGradientAfterTheNextIterationsBackward) {
  // K = 2: iteration t's gradients are applied once t+1's backward is done,
  // so iteration t reads version max(0, t-1); the last update drains.
  const Plan plan = generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {}, 4);
  for (int32_t w = 0; w < 2; ++w) {
    EXPECT_EQ(stream_text(plan, w, StreamKind::kCompute),
              "forward0 backward0 forward1 backward1 update0 forward2 backward2 update1 "
              "forward3 backward3 update2 update3");
    EXPECT_EQ(stream_text(plan, w, StreamKind::kSend), "allreduce0 allreduce1 allreduce2 allreduce3");
  }
  const std::vector<int32_t> version = {0, 0, 1, 2};
  for (int32_t t = 0; t < 4; ++t) {
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kForward, 0, t).at(0)].weight_version, version[t]);
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kBackward, 0, t).at(0)].weight_version, version[t]);
    // Update j reads version j and waits for iteration j's AllReduce.
    const Op& update = plan.ops[ids_of(plan, OpKind::kUpdate, 0, t).at(0)];
    EXPECT_EQ(update.weight_version, t);
    EXPECT_EQ(update.deps, ids_of(plan, OpKind::kAllReduce, 0, t));
  }
  // K-1 = 1 aggregated gradient in flight besides the one computed: 4 × 20 MB.
  EXPECT_DOUBLE_EQ(plan.workers[0].static_bytes, 80e6);
}

TEST(PipeSgdPlan, WarmupTrainsTheFirstIterationsSynchronouslyThenPipelines) {
  // K = 2, warmup 2, 5 iterations: iterations 0 and 1 apply their own
  // gradients at once (versions 0, 1); from 2 on, t reads max(2, t-1) and
  // applies t-1 once t-1 >= 2: nothing after 2's backward, 2 after 3's, 3
  // after 4's, and 4 drains.
  const Plan plan = generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {{"warmup", "2"}}, 5);
  EXPECT_EQ(stream_text(plan, 0, StreamKind::kCompute),
            "forward0 backward0 update0 forward1 backward1 update1 forward2 backward2 "
            "forward3 backward3 update2 forward4 backward4 update3 update4");
  const std::vector<int32_t> version = {0, 1, 2, 2, 3};
  for (int32_t t = 0; t < 5; ++t) {
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kForward, 0, t).at(0)].weight_version, version[t]) << t;
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, 0, t).at(0)].weight_version, t);
  }
  EXPECT_EQ(plan.config["warmup"], 2);
}

TEST(PipeSgdPlan, WidthOneIsSynchronous) {
  const Plan plan = generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {{"width", "1"}, {"segments", "1"}}, 3);
  EXPECT_EQ(stream_text(plan, 1, StreamKind::kCompute),
            "forward0 backward0 update0 forward1 backward1 update1 forward2 backward2 update2");
  for (const Op& op : plan.ops) {
    if (is_compute(op.kind)) {
      EXPECT_EQ(op.weight_version, op.iteration);
    }
  }
}

TEST(PipeSgdPlan, CompressionShrinksTheWireAndAddsCodecOps) {
  // quant8 sends M/4 = 5 MB; compression and decompression each take 2
  // passes over M = 20 MB at 100 GB/s: 4e-4 s, 8e-4 s together as the cost
  // model's 4 passes.
  const Plan plan = generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {{"compression", "quant8"}}, 3);
  const OpId compress = ids_of(plan, OpKind::kCompress, 0, 1).at(0);
  const OpId decompress = ids_of(plan, OpKind::kDecompress, 0, 1).at(0);
  const OpId allreduce = ids_of(plan, OpKind::kAllReduce, 0, 1).at(0);
  EXPECT_NEAR(plan.ops[compress].work_s, 4e-4, 1e-15);
  EXPECT_NEAR(plan.ops[decompress].work_s, 4e-4, 1e-15);
  EXPECT_DOUBLE_EQ(plan.ops[allreduce].bytes, 5e6);
  EXPECT_EQ(plan.ops[allreduce].deps, std::vector<OpId>{compress});
  EXPECT_EQ(plan.ops[decompress].deps, std::vector<OpId>{allreduce});
  EXPECT_EQ(plan.ops[compress].stream, StreamKind::kCompute);
  EXPECT_EQ(stream_text(plan, 0, StreamKind::kCompute),
            "forward0 backward0 compress0 forward1 backward1 compress1 decompress0 update0 "
            "forward2 backward2 compress2 decompress1 update1 decompress2 update2");
  // With the cluster's quant8 rates the AllReduce's hops price the codec, the
  // first encode and the last decode among them: the ops stay (they order the
  // gradient) with no work of their own.
  Cluster measured = simple_cluster(1, 2);
  measured.collective.quant8 = {1e10, 2e10};
  const Plan hops = generate("pipesgd", heavy_profile(), measured, {{"compression", "quant8"}}, 3);
  EXPECT_EQ(hops.ops[ids_of(hops, OpKind::kCompress, 0, 1).at(0)].work_s, 0.0);
  EXPECT_EQ(hops.ops[ids_of(hops, OpKind::kDecompress, 0, 1).at(0)].work_s, 0.0);
  // One worker sends nothing, so nothing is compressed.
  const Plan alone =
      generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {{"compression", "trunc16"}, {"workers", "1"}}, 3);
  EXPECT_TRUE(ids_of(alone, OpKind::kCompress).empty());
  EXPECT_TRUE(ids_of(alone, OpKind::kAllReduce).empty());
}

TEST(PipeSgdPlan, SegmentsAreSentAsBackwardCompletesThem) {
  // Four layers of 1 MB, S = 2: from the last layer, the first 2 MB are done
  // after layer 2, the rest after layer 0; backward runs as [2, 3], [0, 1].
  const Profile four = testing_fixtures::chain_profile(4, 1e-3, 1e-3, 1e6, 1e6);
  const Plan plan = generate("pipesgd", four, simple_cluster(1, 2), {{"segments", "2"}}, 2);
  const std::vector<OpId> backward = ids_of(plan, OpKind::kBackward, 0, 1);
  const std::vector<OpId> allreduce = ids_of(plan, OpKind::kAllReduce, 0, 1);
  ASSERT_EQ(backward.size(), 2u);
  ASSERT_EQ(allreduce.size(), 2u);
  EXPECT_EQ(std::make_pair(plan.ops[backward[0]].first_layer, plan.ops[backward[0]].last_layer), std::make_pair(2, 3));
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(plan.ops[allreduce[s]].deps, std::vector<OpId>{backward[s]});
    EXPECT_DOUBLE_EQ(plan.ops[allreduce[s]].bytes, 2e6);
  }
  // S = 3 on the two-layer profile (2 MB on layer 1, 1 MB on layer 0): M/3 =
  // 1 MB, so layer 1's backward completes two segments, layer 0's the third.
  const Plan three =
      generate("pipesgd", testing_fixtures::two_layer_profile(), simple_cluster(1, 2), {{"segments", "3"}}, 1);
  const std::vector<OpId> pieces = ids_of(three, OpKind::kBackward, 0);
  const std::vector<OpId> sent = ids_of(three, OpKind::kAllReduce, 0);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(three.ops[sent[0]].deps, std::vector<OpId>{pieces[0]});
  EXPECT_EQ(three.ops[sent[1]].deps, std::vector<OpId>{pieces[0]});
  EXPECT_EQ(three.ops[sent[2]].deps, std::vector<OpId>{pieces[1]});
  for (OpId id : sent) EXPECT_DOUBLE_EQ(three.ops[id].bytes, 1e6);
}

TEST(PipeSgdPlan, SimulatedIterationMatchesEquationsTwoAndFive) {
  const Cluster two_by_two = simple_cluster(2, 2);
  // K = 1, eq. (2): 4 ms of compute + 3.062e-2 s of AllReduce = 3.462e-2 s.
  // K = 2, eq. (5), communication-bound: max(4e-3, 3.062e-2) = 3.062e-2 s.
  // K = 2 with quant8: AllReduce(5 MB) = 6·5e-5 + 1.5·5e6·1e-9 + 0.75·5e6·2e-11
  // = 7.875e-3, + t_sync = 7.895e-3 against 4.8 ms of compute with the codec.
  const std::vector<std::pair<testing_fixtures::Settings, double>> cases = {
      {{{"width", "1"}, {"segments", "1"}}, 3.462e-2}, {{}, 3.062e-2}, {{{"compression", "quant8"}}, 7.895e-3}};
  for (const auto& [settings, expected_s] : cases) {
    EXPECT_NEAR(testing_fixtures::analytic_iteration_s("pipesgd", heavy_profile(), two_by_two, settings), expected_s,
                1e-12);
    const Plan plan = generate("pipesgd", heavy_profile(), two_by_two, settings, 12);
    EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, two_by_two), expected_s, 0.01 * expected_s);
  }
  // Compute-bound (two-layer profile on 1 × 4): max(9.15e-3, 5.75e-4) = 9.15 ms.
  const Cluster four = simple_cluster(1, 4);
  const Plan plan = generate("pipesgd", testing_fixtures::two_layer_profile(), four, {}, 12);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, four), 9.15e-3, 0.01 * 9.15e-3);
}

TEST(PipeSgdPlan, TheCodecAtEveryHopAddsToTheAllReduceInBothModels) {
  // The 20 MB gradient over 4 members with quant8 at 1 GB/s encoding and
  // 2 GB/s decoding: (4/1e9 + 7/2e9)·20e6/4 = 37.5 ms more AllReduce, which
  // the communication-bound K = 2 iteration (7.895 ms without) takes whole.
  Cluster two_by_two = simple_cluster(2, 2);
  two_by_two.collective.quant8 = {1e9, 2e9};
  const double expected_s = 7.895e-3 + 37.5e-3;
  const testing_fixtures::Settings quant8 = {{"compression", "quant8"}};
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("pipesgd", heavy_profile(), two_by_two, quant8), expected_s,
              1e-12);
  const Plan plan = generate("pipesgd", heavy_profile(), two_by_two, quant8, 12);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, two_by_two), expected_s, 0.01 * expected_s);
}

TEST(PipeSgdPlan, PipelinedSegmentsHideTheFirstSegmentsBackward) {
  // Eq. (6) as reconstructed charges t_bw(first segment) + S·(AllReduce(M/S)
  // + t_sync) per iteration: 1e-3 + 2·1.547e-2 = 3.194e-2 s (PipeSgd's cost
  // test). With K = 2 the AllReduces of consecutive iterations run back to
  // back on the send stream while compute (4 ms) keeps ahead, so the
  // simulated period is 2·1.547e-2 = 3.094e-2 s: t_bw(first) = 1 ms less.
  const Cluster two_by_two = simple_cluster(2, 2);
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("pipesgd", heavy_profile(), two_by_two, {{"segments", "2"}}),
              3.194e-2, 1e-12);
  const Plan plan = generate("pipesgd", heavy_profile(), two_by_two, {{"segments", "2"}}, 12);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, two_by_two), 3.094e-2, 1e-6);
}

TEST(PipeSgdPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {
      {"workers", "3"}, {"algorithm", "tree"}, {"width", "3"}, {"compression", "trunc16"}, {"segments", "2"}};
  EXPECT_EQ(generate("pipesgd", heavy_profile(), simple_cluster(1, 4), settings).config,
            testing_fixtures::run_strategy("pipesgd", heavy_profile(), simple_cluster(1, 4), settings).config);
  EXPECT_EQ(generate("pipesgd", heavy_profile(), simple_cluster(1, 4)).config,
            testing_fixtures::run_strategy("pipesgd", heavy_profile(), simple_cluster(1, 4)).config);
  EXPECT_THROW(generate("pipesgd", heavy_profile(), simple_cluster(1, 4), {{"width", "0"}}), InputError);
  EXPECT_THROW(generate("pipesgd", heavy_profile(), simple_cluster(1, 4), {{"compression", "fp8"}}), InputError);
  EXPECT_THROW(generate("pipesgd", heavy_profile(), simple_cluster(1, 4), {{"bucket_bytes", "1MB"}}), InputError);
  // The cost model takes any S; a plan holds each segment's ops, so it stops at 4096.
  EXPECT_NO_THROW(
      testing_fixtures::run_strategy("pipesgd", heavy_profile(), simple_cluster(1, 4), {{"segments", "5000"}}));
  EXPECT_THROW(generate("pipesgd", heavy_profile(), simple_cluster(1, 4), {{"segments", "5000"}}), InputError);
}

TEST(PipeSgdPlan, WidthBeyondTheIterationsDrainsEveryUpdate) {
  // K = 5 over 3 iterations: no update fits inside; all three drain, in order.
  const Plan plan = generate("pipesgd", heavy_profile(), simple_cluster(1, 2), {{"width", "5"}}, 3);
  EXPECT_EQ(stream_text(plan, 0, StreamKind::kCompute),
            "forward0 backward0 forward1 backward1 forward2 backward2 update0 update1 update2");
  for (const Op* op : stream_ops(plan, 0, StreamKind::kCompute)) {
    if (op->kind != OpKind::kUpdate) {
      EXPECT_EQ(op->weight_version, 0);
    }
  }
}

TEST(PipeSgdPlan, ValidatesOnFixturesAndEveryPreset) {
  testing_fixtures::expect_plans_everywhere("pipesgd");
  testing_fixtures::expect_plans_everywhere("pipesgd", {{"width", "1"}, {"segments", "4"}, {"compression", "quant8"}});
  testing_fixtures::expect_plans_everywhere("pipesgd", {{"width", "3"}, {"segments", "3"}});
}

}  // namespace
}  // namespace trainsim
