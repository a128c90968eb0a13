// parallax: dense variables by AllReduce, sparse ones by parameter servers
// (seed 004 §5, docs/equations.md §3).
#include <gtest/gtest.h>

#include <limits>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

Prediction run(const Profile& profile, const Cluster& cluster, const Settings& settings = {}) {
  return testing_fixtures::run_strategy("parallax", profile, cluster, settings);
}

// A dense layer of `dense_bytes` and an embedding of `sparse_bytes` of which
// `sparsity` is touched per iteration; forward and backward 1 ms each,
// activations 1 MB each.
Profile language_model(double dense_bytes, double sparse_bytes, double sparsity) {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  LayerProfile embedding = layer("embedding", {"input"}, 1e-3, 1e-3, sparse_bytes, 1e6);
  embedding.sparse = true;
  embedding.sparsity = sparsity;
  p.layers.push_back(embedding);
  p.layers.push_back(layer("lstm", {"embedding"}, 1e-3, 1e-3, dense_bytes, 1e6));
  return p;
}

Profile dense_model() { return testing_fixtures::chain_profile(4, 1e-3, 2e-3, 5e6, 1e6); }

double communication_s(const Prediction& p) { return p.breakdown.exposed_comm_s; }

TEST(Parallax, TransfersTheBytesPerGpuOfTable3) {
  // One machine of 4 with every link at 1 GB/s, no latency, no t_sync and free
  // reduction, so time × 1e9 is bytes. w = 4 MB dense; sparse table 100 MB with
  // α = 0.01: αw = 1 MB.
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link = {1e9, 0};
  cluster.host.link_bandwidth_bytes_per_s = 1e9;
  cluster.host.link_latency_s = 0;
  cluster.collective = {std::numeric_limits<double>::infinity(), 0};
  const Profile profile = language_model(4e6, 100e6, 0.01);
  // ar: dense 4w(N-1)/N = 12 MB per GPU, half each way at once: 6 ms; sparse
  // 2αw(N-1) = 6 MB per GPU, half each way: 3 ms. 9 ms.
  EXPECT_NEAR(communication_s(run(profile, cluster, {{"mode", "ar"}})), 9e-3, 1e-12);
  // The servers' steps (host reduction 20 GB/s, updates 5 passes at 100 GB/s):
  // the table's sums 2·N·αw = 8 MB: 0.4 ms, and its step on the union of 4
  // workers' rows, 5·1e6/1e11 · (1 − 0.99⁴)/0.01 = 5e-5 · 3.940399 s:
  // 0.597019950 ms; the dense server (ps) 2·4·4 MB: 1.6 ms, plus 0.2 ms.
  const double sparse_step_s = 2 * 4 * 1e6 / 20e9 + 5e-5 * 3.940399;
  const double dense_step_s = 2 * 4 * 4e6 / 20e9 + 5 * 4e6 / 1e11;
  // ps: 2w + 2αw = 10 MB per GPU, pushed then pulled over its host link: 10 ms.
  EXPECT_NEAR(communication_s(run(profile, cluster, {{"mode", "ps"}})), 10e-3 + sparse_step_s + dense_step_s, 1e-12);
  // hybrid: dense by AllReduce 6 ms, sparse by servers 2αw = 2 MB: 2 ms. 8 ms.
  const Prediction hybrid = run(profile, cluster);
  EXPECT_NEAR(communication_s(hybrid), 8e-3 + sparse_step_s, 1e-12);
  // The worker updates its dense 4 MB: 5·4e6/1e11 = 0.2 ms; Σfw + Σbw = 4 ms.
  EXPECT_NEAR(hybrid.breakdown.compute_s, 4.2e-3, 1e-12);
  EXPECT_EQ(hybrid.config["mode"], "hybrid");
  EXPECT_EQ(hybrid.config["local_aggregation"], true);
}

TEST(Parallax, ServersHoldTheSparseTables) {
  const Profile profile = language_model(4e6, 100e6, 0.01);
  const Cluster cluster = simple_cluster(1, 4);
  // ar: a full replica, 3·104 MB + 2 MB activations, and AllGatherv's buffer of
  // 4 GPUs' touched rows, 4 MB: 318 MB.
  EXPECT_DOUBLE_EQ(run(profile, cluster, {{"mode", "ar"}}).memory[0].total_bytes(), 318e6);
  // hybrid: weights and gradients of the dense 4 MB and the 1 MB of pulled
  // rows, momentum of the dense 4 MB, 2 MB activations: 16 MB.
  EXPECT_DOUBLE_EQ(run(profile, cluster).memory[0].total_bytes(), 16e6);
  // ps: the servers keep every optimizer state: 12 MB.
  EXPECT_DOUBLE_EQ(run(profile, cluster, {{"mode", "ps"}}).memory[0].total_bytes(), 12e6);
}

TEST(Parallax, HybridBeatsBothOnSparseModelsAndEqualsArOnDenseOnes) {
  // Seed 004 Table 1's ordering on 2 machines × 4: sparse models favour PS over
  // MPI, dense ones MPI over PS; hybrid takes the better of each.
  const Cluster cluster = simple_cluster(2, 4);
  const Profile sparse = language_model(4e6, 400e6, 0.01);
  const double sparse_hybrid = run(sparse, cluster).iteration_s;
  const double sparse_ps = run(sparse, cluster, {{"mode", "ps"}}).iteration_s;
  const double sparse_ar = run(sparse, cluster, {{"mode", "ar"}}).iteration_s;
  EXPECT_LT(sparse_hybrid, sparse_ps);
  EXPECT_LT(sparse_ps, sparse_ar);
  const double dense_hybrid = run(dense_model(), cluster).iteration_s;
  const double dense_ar = run(dense_model(), cluster, {{"mode", "ar"}}).iteration_s;
  EXPECT_DOUBLE_EQ(dense_hybrid, dense_ar);
  EXPECT_LT(dense_ar, run(dense_model(), cluster, {{"mode", "ps"}}).iteration_s);
}

TEST(Parallax, HybridSparsePartCrossesTheNetworkAsDerived) {
  // 2 machines × 2, hybrid, no local aggregation. Dense 4 MB by ring over
  // N = 4 across machines: 6·5e-5 + 1.5·4e6·1e-9 + 0.75·4e6·2e-11 + 2e-5
  // = 3e-4 + 6e-3 + 6e-5 + 2e-5 = 6.38e-3. Sparse αw = 1 MB per worker; per
  // machine and direction: out 2·1e6·(1/2) = 1 MB, in (4-2)·1e6/2 = 1 MB:
  // 5e-5 + 1e6/1e9 = 1.05e-3 per phase against the host link's
  // 1e-5 + 1e6/1e10 = 1.1e-4; push and pull: 2.1e-3. Total 8.48e-3, and each
  // machine's server steps half the table: (2·4·1 MB / 20 GB/s + 5e-5 s ·
  // (1 − 0.99⁴)/0.01) / 2 = 0.298509975 ms.
  const double step_s = (2 * 4 * 1e6 / 20e9 + 5e-5 * 3.940399) / 2;
  const Prediction p = run(language_model(4e6, 100e6, 0.01), simple_cluster(2, 2), {{"local_aggregation", "false"}});
  EXPECT_NEAR(communication_s(p), 8.48e-3 + step_s, 1e-12);
  // With local aggregation the machine sends the union of its 2 workers' rows,
  // 100e6·(1 - 0.99²) = 1.99 MB, over (m-1)/m: 0.995 MB each way per phase:
  // 2·(5e-5 + 0.995e-3) = 2.09e-3. Total 8.47e-3 and the step.
  EXPECT_NEAR(communication_s(run(language_model(4e6, 100e6, 0.01), simple_cluster(2, 2))), 8.47e-3 + step_s, 1e-12);
}

TEST(Parallax, LocalAggregationIsNeverSlower) {
  const Profile profile = language_model(4e6, 400e6, 0.05);
  for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(2, 4), simple_cluster(3, 2)}) {
    for (const std::string mode : {"hybrid", "ps", "ar"}) {
      for (const int64_t n : {int64_t{2}, int64_t{5}, device_count(cluster)}) {
        if (n > device_count(cluster)) continue;
        const std::string workers = std::to_string(n);
        const double with = run(profile, cluster, {{"mode", mode}, {"workers", workers}}).iteration_s;
        const double without =
            run(profile, cluster, {{"mode", mode}, {"workers", workers}, {"local_aggregation", "false"}}).iteration_s;
        EXPECT_LE(with, without) << cluster.machines << "x" << cluster.devices_per_machine << " " << mode << " "
                                 << workers;
      }
    }
  }
}

TEST(Parallax, OneWorkerEqualsSingleUpToTheSparseUpdate) {
  // With one worker only the update differs from single: touched rows only.
  // Single updates 104 MB: 5.2 ms; parallax 5 MB: 0.25 ms. Σfw + Σbw = 4 ms.
  const Profile profile = language_model(4e6, 100e6, 0.01);
  EXPECT_NEAR(run(profile, simple_cluster(1, 4), {{"workers", "1"}}).iteration_s, 4.25e-3, 1e-12);
}

TEST(Parallax, BadSettingsAreInputErrors) {
  EXPECT_THROW(run(dense_model(), simple_cluster(1, 4), {{"mode", "allreduce"}}), InputError);
  EXPECT_THROW(run(dense_model(), simple_cluster(1, 4), {{"local_aggregation", "maybe"}}), InputError);
  EXPECT_THROW(run(dense_model(), simple_cluster(1, 4), {{"server", "host"}}), InputError);
}

}  // namespace
}  // namespace trainsim
