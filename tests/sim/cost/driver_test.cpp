// The predict driver over the whole zoo: every model on every cluster preset,
// every strategy at its defaults, answers with finite positive times. The
// bound per model and preset is generous (10 s, against about 0.5 s measured
// by tests/bench/predict_bench's BM_PredictZoo): it catches a default whose
// work explodes, as cgdp's exact chunking once did on resnet1001 (minutes),
// not a slowdown, which the benchmark measures.
#include "sim/cost/driver.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

constexpr double kGenerousBoundS = 10.0;

class EveryZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryZooModel, PredictsEveryStrategyOnEveryPresetWithinTheBound) {
  const Model model = build_zoo_model(GetParam());
  for (const Cluster& cluster : cluster_presets()) {
    const auto start = std::chrono::steady_clock::now();
    const Profile profile = analytic_profile(model, model.default_batch, cluster);
    const PredictionSet set = predict_analytic(profile, cluster, {}, {});
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(elapsed_s, kGenerousBoundS) << GetParam() << " on " << cluster.name;
    ASSERT_EQ(set.results.size(), strategy_registry().size());
    for (const Prediction& p : set.results) {
      EXPECT_TRUE(std::isfinite(p.iteration_s) && p.iteration_s > 0)
          << p.strategy << " " << GetParam() << " on " << cluster.name << ": " << p.iteration_s;
      EXPECT_TRUE(std::isfinite(p.samples_per_s) && p.samples_per_s > 0) << p.strategy;
    }
  }
}

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const ZooEntry& entry : zoo_entries()) names.push_back(entry.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryZooModel, ::testing::ValuesIn(zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace trainsim
