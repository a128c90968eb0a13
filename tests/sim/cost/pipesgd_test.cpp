// pipesgd: docs/equations.md §1, eqs. (2), (5), (6), (7) and compression.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

// Communication-bound case: two layers of 10 MB of parameters, forward 0.5 ms
// and backward 1 ms each. Σfw = 1 ms, Σbw = 2 ms, M = 20 MB, update
// 5·20e6/1e11 = 1 ms: t_up + t_fw + t_bw = 4 ms. On 2 × 2 machines (N = 4
// crosses them): α = 5e-5, β = 1e-9, γ = 2e-11, t_sync = 2e-5, and
// ringAllReduce(20 MB) = 6·5e-5 + 1.5·2e7·1e-9 + 0.75·2e7·2e-11
//                      = 3e-4 + 3e-2 + 3e-4 = 3.06e-2.
Profile heavy_profile() { return testing_fixtures::chain_profile(2, 0.5e-3, 1e-3, 10e6, 1e6); }
constexpr double kHeavyCompute = 4e-3;
constexpr double kHeavyComm = 3.06e-2 + 2e-5;

TEST(PipeSgd, WidthTwoOneSegmentIsEquationFive) {
  // Communication-bound: max(4e-3, 3.062e-2) = 3.062e-2.
  const Prediction comm_bound = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2));
  EXPECT_NEAR(comm_bound.iteration_s, kHeavyComm, 1e-12);
  EXPECT_NEAR(comm_bound.breakdown.compute_s, kHeavyCompute, 1e-12);
  EXPECT_NEAR(comm_bound.breakdown.exposed_comm_s, kHeavyComm - kHeavyCompute, 1e-12);
  EXPECT_EQ(comm_bound.staleness, 1);
  EXPECT_EQ(comm_bound.config["width"], 2);
  EXPECT_EQ(comm_bound.config["segments"], 1);
  EXPECT_EQ(comm_bound.config["compression"], "none");
  // Compute-bound: two_layer_profile on 1 × 4 computes 9.15 ms against a
  // 5.75e-4 s AllReduce + sync (see DpRing): max(9.15e-3, 5.75e-4) = 9.15e-3.
  const Prediction compute_bound = run_strategy("pipesgd", testing_fixtures::two_layer_profile(), simple_cluster(1, 4));
  EXPECT_NEAR(compute_bound.iteration_s, 9.15e-3, 1e-12);
  EXPECT_EQ(compute_bound.breakdown.exposed_comm_s, 0.0);
}

TEST(PipeSgd, SegmentsCostMoreLatencyWhenCommunicationBound) {
  // S = 2: segments of 10 MB; the first is layer l1, done after 1 ms of backward.
  // Eq. (6): 1e-3 + 2·(ringAllReduce(10 MB) + t_sync), ringAllReduce(10 MB) =
  // 3e-4 + 1.5e-2 + 1.5e-4 = 1.545e-2: 1e-3 + 2·1.547e-2 = 3.194e-2.
  // (6) - (5) = t_bw(first) + (S-1)(2(N-1)α + t_sync) = 1e-3 + 3e-4 + 2e-5 = 1.32e-3.
  const double five = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2)).iteration_s;
  const double six = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2), {{"segments", "2"}}).iteration_s;
  EXPECT_NEAR(six, 3.194e-2, 1e-12);
  EXPECT_NEAR(six - five, 1e-3 + 1 * (2 * 3 * 5e-5 + 2e-5), 1e-12);
}

TEST(PipeSgd, ScalingEfficiencyIsEquationSeven) {
  // Eq. (7): (t_up + t_comp) / max(t_up + t_comp, t_comm) = 4e-3 / 3.062e-2,
  // against N single devices at the same per-device batch.
  const Profile profile = heavy_profile();
  const Cluster cluster = simple_cluster(2, 2);
  const double single = run_strategy("single", profile, cluster).samples_per_s;
  const double pipe = run_strategy("pipesgd", profile, cluster).samples_per_s;
  EXPECT_NEAR(pipe / (4 * single), kHeavyCompute / kHeavyComm, 1e-12);
  // Compute-bound: linear scaling, efficiency 1.
  const Profile light = testing_fixtures::two_layer_profile();
  EXPECT_NEAR(run_strategy("pipesgd", light, simple_cluster(1, 4)).samples_per_s /
                  (4 * run_strategy("single", light, simple_cluster(1, 4)).samples_per_s),
              1.0, 1e-12);
}

TEST(PipeSgd, WidthOneIsDpRingPlusCompressionWork) {
  const Profile profile = heavy_profile();
  const Cluster cluster = simple_cluster(2, 2);
  // Without compression, eq. (2) is dp-ring exactly: 4e-3 + 3.062e-2.
  EXPECT_NEAR(run_strategy("pipesgd", profile, cluster, {{"width", "1"}, {"segments", "1"}}).iteration_s,
              run_strategy("dp-ring", profile, cluster).iteration_s, 1e-15);
  // trunc16: compression work 4 passes over 20 MB at 100 GB/s = 8e-4 on the
  // critical path, and 10 MB on the wire: ringAllReduce = 1.545e-2 (above).
  // t = 4e-3 + 8e-4 + 1.545e-2 + 2e-5 = 2.027e-2.
  const Prediction p =
      run_strategy("pipesgd", profile, cluster, {{"width", "1"}, {"compression", "trunc16"}, {"segments", "1"}});
  EXPECT_NEAR(p.iteration_s, 2.027e-2, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 4.8e-3, 1e-12);
  EXPECT_EQ(p.staleness, 0);
}

TEST(PipeSgd, MeasuredCodecRatesReplaceTheCompressionBound) {
  // With the cluster's trunc16 rates (encode 10 GB/s, decode 20 GB/s) the ring
  // prices the codec at its hops, first encode and last decode included, so
  // the 8e-4 bound above is not added again: each of the 4 members encodes 4
  // chunks of 5 MB and decodes 7, (4·1e-10 + 7·5e-11)·5e6 = 3.75e-3.
  // t = 4e-3 + 1.545e-2 + 3.75e-3 + 2e-5 = 2.322e-2.
  const Profile profile = heavy_profile();
  Cluster cluster = simple_cluster(2, 2);
  cluster.collective.trunc16 = {1e10, 2e10};
  const Prediction p =
      run_strategy("pipesgd", profile, cluster, {{"width", "1"}, {"compression", "trunc16"}, {"segments", "1"}});
  EXPECT_NEAR(p.iteration_s, 2.322e-2, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 4e-3, 1e-12);
  // quant8's rates are not given: its bound still counts.
  EXPECT_NEAR(compression_work_s(cluster, "quant8", 20e6), 8e-4, 1e-15);
  EXPECT_EQ(compression_work_s(cluster, "trunc16", 20e6), 0.0);
  EXPECT_EQ(compression_work_s(cluster, "none", 20e6), 0.0);
}

TEST(PipeSgd, WidthOneWithSegmentsOverlapsBackward) {
  // Sequential iteration, communication overlapped with backward:
  // t_up + t_fw + max(t_bw, eq. (6) term) = 1e-3 + 1e-3 + max(2e-3, 3.194e-2) = 3.394e-2.
  EXPECT_NEAR(
      run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2), {{"width", "1"}, {"segments", "2"}}).iteration_s,
      3.394e-2, 1e-12);
}

TEST(PipeSgd, Quant8QuartersTheWireBytes) {
  // 5 MB on the wire: 3e-4 + 1.5·5e6·1e-9 + 0.75·5e6·2e-11 = 3e-4 + 7.5e-3 +
  // 7.5e-5 = 7.875e-3, + t_sync = 7.895e-3. The compute side, with the 8e-4 of
  // compression hidden there, is 4.8e-3: still communication-bound.
  const Prediction p = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2), {{"compression", "quant8"}});
  EXPECT_NEAR(p.iteration_s, 7.895e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 4.8e-3, 1e-12);
  // Memory: the replica (60 MB + 2 MB activations), one in-flight gradient
  // buffer of 20 MB (K - 1 = 1) and the 5 MB narrow copy.
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 60e6 + 2e6 + 20e6 + 5e6);
}

TEST(PipeSgd, PackingCopiesTheFloat32GradientWhateverTheWire) {
  // Packing at 10 GB/s: quant8's AllReduce packs the whole 20 MB (2e-3 s),
  // not the 5 MB on the wire: 7.895e-3 + 2e-3 = 9.895e-3.
  Cluster cluster = simple_cluster(2, 2);
  cluster.collective.pack_bytes_per_s = 1e10;
  const Prediction p = run_strategy("pipesgd", heavy_profile(), cluster, {{"compression", "quant8"}});
  EXPECT_NEAR(p.iteration_s, 9.895e-3, 1e-12);
}

TEST(PipeSgd, WiderPipelineOnlyAddsStalenessAndBuffers) {
  // Eq. (4): any K >= 2 takes the same time; K = 3 holds 2 extra gradients.
  const Prediction two = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2));
  const Prediction three = run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2), {{"width", "3"}});
  EXPECT_DOUBLE_EQ(three.iteration_s, two.iteration_s);
  EXPECT_EQ(three.staleness, 2);
  EXPECT_DOUBLE_EQ(three.memory[0].gradients_bytes, 3 * 20e6);
}

TEST(PipeSgd, BadSettingsAreInputErrors) {
  const Profile profile = heavy_profile();
  const Cluster cluster = simple_cluster(2, 2);
  EXPECT_THROW(run_strategy("pipesgd", profile, cluster, {{"width", "0"}}), InputError);
  EXPECT_THROW(run_strategy("pipesgd", profile, cluster, {{"segments", "0"}}), InputError);
  EXPECT_THROW(run_strategy("pipesgd", profile, cluster, {{"compression", "fp8"}}), InputError);
}

TEST(PipeSgd, OneWorkerCommunicatesNothing) {
  const Prediction p =
      run_strategy("pipesgd", heavy_profile(), simple_cluster(2, 2), {{"workers", "1"}, {"compression", "quant8"}});
  EXPECT_DOUBLE_EQ(p.iteration_s, kHeavyCompute);
}

}  // namespace
}  // namespace trainsim
