// Bucket-size and segment-count sweeps for dp-overlap and pipesgd.
#include "sim/search/sync_size.hpp"

#include <gtest/gtest.h>

#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

// Two workers on one machine of simple_cluster: ring AllReduce of M bytes is
// 2(N-1)α + 2((N-1)/N)Mβ + ((N-1)/N)Mγ = 20 us + M/10 GB/s + M/100 GB/s,
// plus t_sync 20 us: 40 us + 1.1e-10·M s.
double allreduce_two_s(double bytes) { return 40e-6 + 1.1e-10 * bytes; }

TEST(SyncSize, BucketSearchKeepsTheLastBucketSmall) {
  // Four layers of 20 MB, backward 10 ms each. 25 MB buckets pair them:
  // {l3,l2} ready at 20 ms, {l1,l0} at 40 ms, whose 40 MB AllReduce ends at
  // 40 + 4.44 = 44.44 ms. Buckets up to 16 MiB hold one layer each, ready at
  // 10, 20, 30, 40 ms; each 20 MB AllReduce takes 2.24 ms and ends before the
  // next is ready, so the last ends at 42.24 ms. 64 KiB is the first such
  // candidate after 25 MB, and ties keep the earlier candidate.
  const Profile profile = chain_profile(4, 5e-3, 10e-3, 20e6, 1e6);
  const Cluster cluster = simple_cluster(1, 2);
  const CollectiveAlgorithm ring = CollectiveAlgorithm::kRing;
  EXPECT_NEAR(overlap_backward_end_s(profile, cluster, 2, ring, 25e6), 40e-3 + allreduce_two_s(40e6), 1e-12);
  EXPECT_NEAR(overlap_backward_end_s(profile, cluster, 2, ring, 65536), 40e-3 + allreduce_two_s(20e6), 1e-12);
  EXPECT_DOUBLE_EQ(best_bucket_bytes(profile, cluster, 2, ring), 65536);

  // dp-overlap without bucket_bytes takes it and records it.
  const Prediction searched = run_strategy("dp-overlap", profile, cluster);
  EXPECT_DOUBLE_EQ(searched.config["bucket_bytes"].get<double>(), 65536);
  const Prediction given = run_strategy("dp-overlap", profile, cluster, {{"bucket_bytes", "25MB"}});
  EXPECT_NEAR(given.iteration_s - searched.iteration_s, allreduce_two_s(40e6) - allreduce_two_s(20e6), 1e-12);
}

TEST(SyncSize, BucketCandidatesStartAtTheDefaultAndCoverTheModel) {
  const Profile profile = chain_profile(4, 5e-3, 10e-3, 20e6, 1e6);  // 80 MB of gradients
  const std::vector<double> sizes = bucket_size_candidates(profile);
  ASSERT_GE(sizes.size(), 3u);
  EXPECT_DOUBLE_EQ(sizes[0], kDefaultBucketBytes);
  EXPECT_DOUBLE_EQ(sizes[1], 65536);
  EXPECT_GE(sizes.back(), 80e6);      // 2^27 = 134 MB, the first power of two above 80 MB
  EXPECT_LT(sizes.back() / 2, 80e6);
}

TEST(SyncSize, OneWorkerKeepsTheDefaultBucket) {
  const Profile profile = chain_profile(4, 5e-3, 10e-3, 20e6, 1e6);
  EXPECT_DOUBLE_EQ(best_bucket_bytes(profile, simple_cluster(1, 2), 1, CollectiveAlgorithm::kRing),
                   kDefaultBucketBytes);
}

TEST(SyncSize, SynchronousPipeSgdSegmentsWhenBackwardCanHideTheAllReduce) {
  // Width 1 (synchronous), 4 layers of 20 MB, backward 10 ms each, 2 workers.
  // S = 1 exposes the whole AllReduce of 80 MB: 40 us + 8.8 ms = 8.84 ms.
  // S = 2: segments of 40 MB, the first ready after 20 ms of backward:
  // 20 ms + 2·(40 us + 4.4 ms) = 28.88 ms < Σbw 40 ms, nothing exposed; S = 4
  // also hides it (10 + 4·2.24 = 18.96 ms), and ties keep the smaller S.
  const Profile profile = chain_profile(4, 5e-3, 10e-3, 20e6, 1e6);
  const Cluster cluster = simple_cluster(1, 2);
  PipeSgdSettings settings;
  settings.workers = 2;
  settings.width = 1;
  settings.segments = 1;
  EXPECT_NEAR(pipesgd_times(profile, cluster, settings).exposed_s, allreduce_two_s(80e6), 1e-12);
  settings.segments = 2;
  EXPECT_DOUBLE_EQ(pipesgd_times(profile, cluster, settings).exposed_s, 0);
  EXPECT_EQ(best_pipesgd_segments(profile, cluster, settings), 2);

  const Prediction p = run_strategy("pipesgd", profile, cluster, {{"width", "1"}});
  EXPECT_EQ(p.config["segments"], 2);
  EXPECT_EQ(run_strategy("pipesgd", profile, cluster, {{"width", "1"}, {"segments", "1"}}).config["segments"], 1);
}

TEST(SyncSize, PipelinedPipeSgdKeepsSequentialCommunicationWhenComputeHidesIt) {
  // Width 2: compute 20 + 40 ms + update 5·80 MB/100 GB/s = 64 ms hides the
  // 8.84 ms AllReduce already at S = 1; more segments only add latency
  // (docs/equations.md §1, (6) − (5) > 0), so S = 1 is kept.
  const Profile profile = chain_profile(4, 5e-3, 10e-3, 20e6, 1e6);
  const Prediction p = run_strategy("pipesgd", profile, simple_cluster(1, 2));
  EXPECT_EQ(p.config["segments"], 1);
  EXPECT_NEAR(p.iteration_s, 64e-3, 1e-12);
}

}  // namespace
}  // namespace trainsim
