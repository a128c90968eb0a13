// The two interpreters of a strategy must agree where the closed form is
// exact: dp-ring (one AllReduce after backward), gpipe and 1f1b with equal
// stages, and PipeDream's 1F1B with negligible transfers. A property test over random profiles and
// clusters holds the simulated iteration time within 1% of the analytic one.
#include <gtest/gtest.h>

#include <random>

#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::Settings;

struct Case {
  Profile profile;
  Cluster cluster;
};

// A chain of `layers` layers; times, weights and activations drawn per layer
// unless `equal`, in which case every layer is the same.
Profile random_chain(std::mt19937_64& rng, int layers, bool equal, double activation_scale) {
  std::uniform_real_distribution<double> ms(0.2e-3, 5e-3), mb(0.1e6, 20e6);
  const double f = ms(rng), b = 2 * f, w = mb(rng), a = mb(rng) * activation_scale;
  Profile p = testing_fixtures::chain_profile(layers, f, b, w, a, 64);
  if (!equal) {
    for (LayerProfile& l : p.layers) {
      l.forward_s = ms(rng);
      l.backward_s = ms(rng) * 2;
      l.param_bytes = mb(rng);
      l.activation_bytes = mb(rng) * activation_scale;
    }
  }
  return p;
}

Cluster random_cluster(std::mt19937_64& rng, int64_t machines, int64_t devices_per_machine) {
  Cluster c = testing_fixtures::simple_cluster(machines, devices_per_machine);
  std::uniform_real_distribution<double> gbps(2e9, 50e9), us(1e-6, 30e-6);
  c.intra_link = {gbps(rng), us(rng)};
  c.inter_link = {gbps(rng) / 4, us(rng) * 3};
  return c;
}

double relative_gap(const std::string& id, const Case& c, const Settings& settings, int32_t iterations) {
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  const StrategyInfo& strategy = find_strategy(id, "--strategies");
  const double analytic_s = predict_strategy(strategy, c.profile, c.cluster, config).iteration_s;
  const Plan plan = generate_plan(strategy, c.profile, c.cluster, config, iterations);
  const double simulated_s = simulate_plan(plan, c.cluster, SimOptions{}).iteration_s;
  return std::abs(simulated_s - analytic_s) / analytic_s;
}

TEST(Agreement, DpRingSimulatedEqualsAnalyticOnRandomCases) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 25; ++trial) {
    std::uniform_int_distribution<int> layers(1, 30), machines(1, 3), devices(1, 4);
    const Case c{random_chain(rng, layers(rng), false, 1.0), random_cluster(rng, machines(rng), devices(rng))};
    EXPECT_LT(relative_gap("dp-ring", c, {}, 12), 0.01) << "trial " << trial;
  }
}

TEST(Agreement, GpipeWithEqualStagesSimulatedEqualsAnalytic) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> stages(1, 6), per_stage(1, 4), microbatches(1, 16);
    const int k = stages(rng);
    const Case c{random_chain(rng, k * per_stage(rng), true, 1.0), random_cluster(rng, 1, k)};
    const Settings settings = {{"microbatches", std::to_string(microbatches(rng))}};
    EXPECT_LT(relative_gap("gpipe", c, settings, 12), 0.01) << "trial " << trial;
  }
}

// 1F1B with a flush on equal stages, transfers included: within 2%, the
// closed form's steady state leaving out the warm-up's and the drain's
// shorter periods.
TEST(Agreement, OneFOneBFlushWithEqualStagesSimulatedEqualsAnalytic) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> stages(1, 6), per_stage(1, 4), microbatches(1, 16);
    const int k = stages(rng);
    const Case c{random_chain(rng, k * per_stage(rng), true, 1.0), random_cluster(rng, 1, k)};
    const Settings settings = {{"microbatches", std::to_string(microbatches(rng))}};
    EXPECT_LT(relative_gap("1f1b", c, settings, 12), 0.02) << "trial " << trial;
  }
}

// Interleaved 1F1B on equal chunks with negligible transfers: M + (K − 1)/v
// micro-batch steps in both.
TEST(Agreement, InterleavedOneFOneBSimulatedEqualsAnalytic) {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> devices(2, 5), chunks(2, 3), per_chunk(1, 3), groups(1, 4);
    const int k = devices(rng), v = chunks(rng);
    const Case c{random_chain(rng, k * v * per_chunk(rng), true, 1e-6), random_cluster(rng, 1, k)};
    const Settings settings = {{"microbatches", std::to_string(k * groups(rng))}, {"chunks", std::to_string(v)}};
    EXPECT_LT(relative_gap("1f1b", c, settings, 8), 0.02) << "trial " << trial << " k " << k << " v " << v;
  }
}

// ZB-H1 on equal stages with negligible transfers, at least K micro-batches
// and any split of the backward: M periods and (K − 1)·max(F + B − W, F, B).
TEST(Agreement, ZeroBubbleWithEqualStagesSimulatedEqualsAnalytic) {
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> stages(2, 6), per_stage(1, 4), extra(0, 12);
    std::uniform_real_distribution<double> share(0.1, 0.9);
    const int k = stages(rng);
    const Case c{random_chain(rng, k * per_stage(rng), true, 1e-6), random_cluster(rng, 1, k)};
    const Settings settings = {{"microbatches", std::to_string(k + extra(rng))},
                               {"weight_share", std::to_string(share(rng))}};
    EXPECT_LT(relative_gap("zb-h1", c, settings, 8), 0.02) << "trial " << trial << " k " << k;
  }
}

TEST(Agreement, OneFOneBWithNegligibleTransfersSimulatedEqualsAnalytic) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> stages(1, 8), layers(8, 40);
    const int k = stages(rng);
    const Case c{random_chain(rng, layers(rng), false, 1e-6), random_cluster(rng, 1, k)};
    EXPECT_LT(relative_gap("pipedream", c, {{"replicate", "false"}}, 4 * k + 20), 0.01) << "trial " << trial;
  }
}

}  // namespace
}  // namespace trainsim
