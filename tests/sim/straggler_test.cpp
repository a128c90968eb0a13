// Seed 001's straggler study (Table 2): ResNet-164 in K = 3 blocks, every
// compute op slowed by x% with probability 1/3. DSP's queues decouple the
// blocks, so it slows down less than GPipe (a flush per mini-batch) and 1F1B
// (each stage waits on its neighbours every mini-batch).
#include <gtest/gtest.h>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

// Mean over three seeds of (iteration time with stragglers) / (without) - 1.
double slowdown(const std::string& id, const std::vector<std::pair<std::string, std::string>>& settings,
                double slowdown_factor) {
  const Cluster cluster = load_cluster("p40x4-pcie3");
  const Model model = build_zoo_model("resnet164");
  const Profile profile = analytic_profile(model, model.default_batch, cluster);
  StrategyConfig config;
  config.set("stages", "3", "--set stages");
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  const Plan plan = generate_plan(find_strategy(id, "--strategies"), profile, cluster, config, 60);
  const double clean_s = simulate_plan(plan, cluster, SimOptions{}).iteration_s;
  double total = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SimOptions options;
    options.straggler_probability = 1.0 / 3.0;
    options.straggler_slowdown = slowdown_factor;
    options.seed = seed;
    total += simulate_plan(plan, cluster, options).iteration_s / clean_s - 1.0;
  }
  return total / 3;
}

TEST(Stragglers, DspSlowsDownLessThanGpipeAndOneFOneB) {
  for (double factor : {1.5, 2.0}) {
    const double dsp = slowdown("dsp", {{"queues", R"({"p":[2,2,0],"m":[8,4,0]})"}}, factor);
    const double gpipe = slowdown("gpipe", {}, factor);
    const double one_f_one_b = slowdown("pipedream", {{"replicate", "false"}}, factor);
    EXPECT_GT(dsp, 0.0) << "stragglers must cost something";
    EXPECT_LT(dsp, gpipe) << "slowdown factor " << factor;
    EXPECT_LT(dsp, one_f_one_b) << "slowdown factor " << factor;
    // A block whose every op is slowed by x with probability 1/3 runs x/3
    // slower on average; with its queues DSP stays within a few points of that.
    EXPECT_LT(dsp, (factor - 1.0) / 3.0 + 0.05) << "slowdown factor " << factor;
  }
}

}  // namespace
}  // namespace trainsim
