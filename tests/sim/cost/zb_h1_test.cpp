// `zb-h1` (Qi et al. 2023, ZB-H1): M periods of a stage's forward and whole
// backward, and a bubble of (K − 1)·max(F + B − W, F, B) instead of 1F1B's
// (K − 1)·(F + B + W) (docs/equations.md §5).
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::simple_cluster;

Cluster quiet_cluster(int64_t devices) {
  Cluster cluster = simple_cluster(1, devices);
  cluster.intra_link.latency_s = 0;
  cluster.collective.sync_s = 0;
  return cluster;
}

TEST(ZbH1, EqualStagesShrinkOneFOneBsBubbleToAThird) {
  // K = 4 equal stages, F 1 and backward 2 ms a mini-batch, M = 12, B = W:
  // 12 × 3/12 + 3 × 1/12 = 3.25 ms; 1F1B's bubble is 3 × 3/12 (3.75 ms).
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  const Prediction p = testing_fixtures::run_strategy("zb-h1", profile, quiet_cluster(4), {{"microbatches", "12"}});
  EXPECT_NEAR(p.iteration_s, 3.25e-3, 1e-12);
  EXPECT_NEAR(p.breakdown.compute_s, 3e-3, 1e-12);
  EXPECT_EQ(p.staleness, 0);
  const Prediction one = testing_fixtures::run_strategy("1f1b", profile, quiet_cluster(4), {{"microbatches", "12"}});
  EXPECT_NEAR(one.iteration_s, 3.75e-3, 1e-12);
  // Its memory is 1F1B's: stage k keeps K − k micro-batches' activations.
  ASSERT_EQ(p.memory.size(), one.memory.size());
  for (size_t k = 0; k < p.memory.size(); ++k) {
    EXPECT_DOUBLE_EQ(p.memory[k].activations_bytes, one.memory[k].activations_bytes) << k;
  }
}

TEST(ZbH1, TheBubbleTakesTheLargestOfItsThreeTerms) {
  // f = 1/12, b = 2/12 ms a micro-batch. Weight share 0.25: B = 1.5/12,
  // W = 0.5/12, F + B − W = 2/12 the largest: 3 + 3 × 2/12 = 3.5 ms. Share
  // 0.9: B = 0.2/12, W = 1.8/12, F = 1/12 the largest: 3 + 3/12 = 3.25 ms.
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 0, 0);
  const auto at = [&](const char* share) {
    return testing_fixtures::run_strategy("zb-h1", profile, quiet_cluster(4),
                                          {{"microbatches", "12"}, {"weight_share", share}})
        .iteration_s;
  };
  EXPECT_NEAR(at("0.25"), 3.5e-3, 1e-12);
  EXPECT_NEAR(at("0.9"), 3.25e-3, 1e-12);
  // F 1, backward 4 ms: share 0.25 gives B = 3/12, W = 1/12: B − W + F = 3/12 beats B.
  const Profile heavy = chain_profile(4, 1e-3, 4e-3, 0, 0);
  EXPECT_NEAR(testing_fixtures::run_strategy("zb-h1", heavy, quiet_cluster(4),
                                             {{"microbatches", "12"}, {"weight_share", "0.25"}})
                  .iteration_s,
              5e-3 + 3 * 3e-3 / 12, 1e-12);
}

TEST(ZbH1, ReplicasAreNotItsSetting) {
  try {
    testing_fixtures::run_strategy("zb-h1", chain_profile(4, 1e-3, 2e-3, 0, 0), quiet_cluster(4),
                                   {{"replicas", "1,1,1,1"}});
    FAIL() << "replicas accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replicas"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainsim
