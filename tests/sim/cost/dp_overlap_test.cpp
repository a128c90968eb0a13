// dp-overlap: gradient buckets all-reduced while backward goes on.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/search/sync_size.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::run_strategy;
using testing_fixtures::simple_cluster;

// l0, relu, l1, l2: forward and backward 1 ms each (relu 0.5 ms), 1 MB of
// parameters each (relu none), 1 MB of activations.
Profile three_layers_and_a_relu() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  p.layers.push_back(layer("l0", {"input"}, 1e-3, 1e-3, 1e6, 1e6));
  p.layers.push_back(layer("relu", {"l0"}, 0.5e-3, 0.5e-3, 0, 1e6));
  p.layers.push_back(layer("l1", {"relu"}, 1e-3, 1e-3, 1e6, 1e6));
  p.layers.push_back(layer("l2", {"l1"}, 1e-3, 1e-3, 1e6, 1e6));
  return p;
}

TEST(DpOverlap, BucketsStartWhenFilledAndOneCollectiveRunsAtATime) {
  // Buckets of 1.5 MB in reverse order: l2 (1 MB) then l1 brings 2 MB: bucket
  // A closes when l1's backward ends at 2 ms; relu adds nothing; l0 makes
  // bucket B (1 MB), closed with backward at 3.5 ms. Σfw = Σbw = 3.5 ms;
  // update of 3 MB: 0.15 ms.
  // 2 × 2 machines, N = 4 crosses them: α = 5e-5, β = 1e-9, γ = 2e-11, sync 2e-5.
  // A: 6·5e-5 + 1.5·2e6·1e-9 + 0.75·2e6·2e-11 + 2e-5 = 3e-4 + 3e-3 + 3e-5 + 2e-5
  //    = 3.35e-3, from 2 ms to 5.35 ms.
  // B: 3e-4 + 1.5e-3 + 1.5e-5 + 2e-5 = 1.835e-3, waits for A: 5.35 → 7.185 ms.
  // t = 3.5 + max(3.5, 7.185) + 0.15 = 10.835 ms.
  const Prediction p =
      run_strategy("dp-overlap", three_layers_and_a_relu(), simple_cluster(2, 2), {{"bucket_bytes", "1.5MB"}});
  EXPECT_NEAR(p.iteration_s, 10.835e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.exposed_comm_s, 7.185e-3 - 3.5e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.total_s(), p.iteration_s, 1e-15);
  EXPECT_DOUBLE_EQ(p.config["bucket_bytes"].get<double>(), 1.5e6);
}

TEST(DpOverlap, BucketWaitsForItsLastLayersBackward) {
  // The same buckets on one machine of 4 (α = 1e-5, β = 1e-10):
  // A: 6e-5 + 1.5·2e6·1e-10 + 0.75·2e6·2e-11 + 2e-5 = 6e-5 + 3e-4 + 3e-5 + 2e-5
  //    = 4.1e-4, 2 → 2.41 ms. B: 6e-5 + 1.5e-4 + 1.5e-5 + 2e-5 = 2.45e-4, ready
  // only when l0's backward ends at 3.5 ms (after the relu's): 3.5 → 3.745 ms.
  // t = 3.5 + 3.745 + 0.15 = 7.395 ms.
  const Prediction p =
      run_strategy("dp-overlap", three_layers_and_a_relu(), simple_cluster(1, 4), {{"bucket_bytes", "1.5MB"}});
  EXPECT_NEAR(p.iteration_s, 7.395e-3, 1e-12);
}

TEST(DpOverlap, OneHugeBucketEqualsDpRing) {
  const Profile profile = testing_fixtures::two_layer_profile();
  for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(2, 2)}) {
    EXPECT_NEAR(run_strategy("dp-overlap", profile, cluster, {{"bucket_bytes", "1GB"}}).iteration_s,
                run_strategy("dp-ring", profile, cluster).iteration_s, 1e-15);
  }
}

TEST(DpOverlap, TinyBucketsWithFastLinksApproachSingle) {
  // 50 layers of 1 MB, one bucket per layer, on links of 1 PB/s with no
  // latency and no t_sync: only the last bucket's 1.5 ns AllReduce shows.
  const Profile profile = testing_fixtures::chain_profile(50, 1e-3, 2e-3, 1e6, 1e6);
  Cluster fast = simple_cluster(1, 4);
  fast.intra_link = {1e15, 0};
  fast.collective = {1e15, 0};
  const double single = run_strategy("single", profile, fast).iteration_s;
  const double overlap = run_strategy("dp-overlap", profile, fast, {{"bucket_bytes", "1MB"}}).iteration_s;
  EXPECT_GE(overlap, single);
  EXPECT_LT(overlap - single, 1e-8);
  // On ordinary links the overlap still beats the AllReduce after backward.
  EXPECT_LT(run_strategy("dp-overlap", profile, simple_cluster(1, 4), {{"bucket_bytes", "1MB"}}).iteration_s,
            run_strategy("dp-ring", profile, simple_cluster(1, 4)).iteration_s);
}

TEST(DpOverlap, DefaultBucketIsSearchedAndBadSizesAreInputErrors) {
  // The bucket size is the search's (sim/search/sync_size_test.cpp holds its
  // hand cases), recorded, and never slower than 25 MB.
  const Profile profile = testing_fixtures::two_layer_profile();
  const Prediction searched = run_strategy("dp-overlap", profile, simple_cluster(1, 4));
  EXPECT_DOUBLE_EQ(searched.config["bucket_bytes"].get<double>(),
                   best_bucket_bytes(profile, simple_cluster(1, 4), 4, CollectiveAlgorithm::kRing));
  EXPECT_LE(searched.iteration_s,
            run_strategy("dp-overlap", profile, simple_cluster(1, 4), {{"bucket_bytes", "25MB"}}).iteration_s);
  EXPECT_THROW(run_strategy("dp-overlap", profile, simple_cluster(1, 4), {{"bucket_bytes", "-5"}}), InputError);
  EXPECT_THROW(run_strategy("dp-overlap", profile, simple_cluster(1, 4), {{"bucket_bytes", "lots"}}), InputError);
}

}  // namespace
}  // namespace trainsim
