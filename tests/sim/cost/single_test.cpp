// `single` is forward + backward + update, nothing else.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

TEST(Single, IsForwardPlusBackwardPlusUpdate) {
  const Profile profile = testing_fixtures::two_layer_profile();
  const Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  StrategyConfig config;
  const Prediction p = predict_single(profile, cluster, config);
  // Forward 1 + 2 ms, backward 2 + 4 ms; update of 3 MB (1 MB + 2 MB) at 100 GB/s
  // with 5 passes: 5 × 3e6 / 1e11 = 0.15 ms. Total 9.15 ms.
  EXPECT_NEAR(p.iteration_s, 9.15e-3, 1e-12);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 32 / 9.15e-3);
  EXPECT_DOUBLE_EQ(p.breakdown.total_s(), p.iteration_s);
  ASSERT_EQ(p.memory.size(), 1u);
  // Weights, gradients, momentum: 3 × 3 MB; activations 4 + 8 MB.
  EXPECT_DOUBLE_EQ(p.memory[0].total_bytes(), 9e6 + 12e6);
  EXPECT_EQ(p.staleness, 0);
}

TEST(Single, MeasuredUpdateTimesReplaceTheBandwidthEstimate) {
  Profile profile = testing_fixtures::two_layer_profile();
  const Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  profile.layers[0].update_s = 0.01e-3;  // measured; layer 1 keeps 5 × 2e6 / 1e11 = 0.1 ms
  EXPECT_NEAR(model_update_s(profile, cluster), 0.11e-3, 1e-15);
  EXPECT_NEAR(range_update_s(profile, 1, 1, cluster), 0.1e-3, 1e-15);
  StrategyConfig config;
  // Forward 3 ms + backward 6 ms + update 0.11 ms.
  EXPECT_NEAR(predict_single(profile, cluster, config).iteration_s, 9.11e-3, 1e-12);
}

TEST(StrategyConfig, UnknownKeyIsReported) {
  const Profile profile = testing_fixtures::two_layer_profile();
  const Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  EXPECT_THROW(testing_fixtures::run_strategy("single", profile, cluster, {{"widht", "2"}}), InputError);
}

TEST(StrategyConfig, RangesMustCoverEveryLayer) {
  StrategyConfig config;
  config.set("stages", "0-3,4-8", "--set stages");
  EXPECT_EQ(config.get_ranges("stages", 9), (std::vector<LayerRange>{{0, 3}, {4, 8}}));
  StrategyConfig gap;
  gap.set("stages", "0-3,5-8", "--set stages");
  EXPECT_THROW(gap.get_ranges("stages", 9), InputError);
  StrategyConfig short_cover;
  short_cover.set("stages", "[[0,3],[4,7]]", "--set stages");
  EXPECT_THROW(short_cover.get_ranges("stages", 9), InputError);
}

}  // namespace
}  // namespace trainsim
