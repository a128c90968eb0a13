// A plan says everything the executor needs (issue 16, item 1): each op
// carries its payload, its weight policy, its AllReduce's codec, and the plan
// its servers, so the interpreter never reads the strategy's name or settings.
// Every strategy's plan, with `strategy` and `config` erased, trains to the
// same losses, bit for bit (the runs are deterministic: collectives, servers
// and host sums add in a fixed order, and two workers' losses add either way
// round to the same double).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::execute;
using strategy_runs::plan_of;
using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;
using Case = strategy_runs::StrategyCase;
using strategy_runs::cases;
using strategy_runs::kMomentum;

Plan erased(Plan plan) {
  plan.strategy.clear();
  plan.config = nlohmann::json::object();
  return plan;
}

StrategyRun run_erased(const RunSpec& spec) { return execute(spec, erased(plan_of(spec))); }

class PlanErased : public ::testing::TestWithParam<Case> {};

TEST_P(PlanErased, TrainsToTheSameLosses) {
  const RunSpec& spec = GetParam().spec;
  const Plan plan = plan_of(spec);
  ASSERT_EQ(plan.workers.size(), spec.strategy == "single" ? 1u : 2u);
  const StrategyRun named = execute(spec, plan);
  const StrategyRun anonymous = execute(spec, erased(plan));
  EXPECT_TRUE(anonymous.plan.strategy.empty());
  const std::vector<double>& expected = named.result.loss_per_iteration;
  const std::vector<double>& losses = anonymous.result.loss_per_iteration;
  ASSERT_EQ(losses.size(), static_cast<size_t>(spec.iterations));
  ASSERT_EQ(expected.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(losses[i])) << i;
    EXPECT_GT(losses[i], 0.0) << i;
    EXPECT_EQ(losses[i], expected[i]) << "iteration " << i;
  }
  // It trained: the weights moved, so the losses after the first depend on the plan.
  EXPECT_NE(losses.front(), losses.back());
  EXPECT_EQ(anonymous.result.traffic.pair_bytes, named.result.traffic.pair_bytes);
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, PlanErased, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// Every strategy the executor runs has a case; the one it does not, zb-h1
// (backwards split into input and weight gradients), is refused with the
// reason before anything runs.
TEST(PlanErasedCases, CoverEveryStrategy) {
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.spec.strategy);
  EXPECT_EQ(strategy_registry().size(), 14u);
  for (const StrategyInfo& s : strategy_registry()) {
    if (s.id == "zb-h1") continue;
    EXPECT_TRUE(covered.contains(s.id)) << s.id;
  }
  const RunSpec zero_bubble{.strategy = "zb-h1", .settings = {{"microbatches", "4"}}, .sgd = kMomentum};
  try {
    run_erased(zero_bubble);
    ADD_FAILURE() << "the executor ran a zero-bubble plan";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input and weight gradients apart (a zero-bubble schedule)"),
              std::string::npos)
        << e.what();
  }
}

// The erased plans still carry each strategy's behaviour: the feature a case
// exercises changes the losses against the same strategy without it, and
// Parallax's servers (one per sparse table, a dense one in ps mode, none in
// ar mode) come from the plan.
TEST(PlanErasedCases, KeepWhatTheStrategySettingsChose) {
  const auto losses = [](const RunSpec& spec) { return run_erased(spec).result.loss_per_iteration; };
  const RunSpec spectrain{.strategy = "dualpipe", .settings = {{"spectrain", "true"}}, .iterations = 6};
  RunSpec vanilla = spectrain;
  vanilla.settings = {{"spectrain", "false"}};
  EXPECT_NE(losses(spectrain).back(), losses(vanilla).back());

  const RunSpec quant8{.strategy = "pipesgd", .settings = {{"width", "2"}, {"compression", "quant8"}}};
  RunSpec uncompressed = quant8;
  uncompressed.settings[1].second = "none";
  const std::vector<double> compressed_losses = losses(quant8);
  EXPECT_NE(compressed_losses.back(), losses(uncompressed).back());
  EXPECT_NE(compressed_losses.back(), losses({.strategy = "dp-ring"}).back());

  // On one machine of two: hybrid sends the dense AllReduce (17,680 bytes
  // an iteration), ar that and the gathered rows, ps nothing (its server
  // is the host's).
  std::map<std::string, int64_t> sent;
  for (const std::string mode : {"hybrid", "ps", "ar"}) {
    const StrategyRun r = run_erased({.strategy = "parallax", .settings = {{"mode", mode}}, .sgd = kMomentum,
                                      .text = true});
    sent[mode] = r.result.traffic.pair_bytes.at(0).at(1);
    if (mode == "hybrid") {
      EXPECT_EQ(sent[mode], r.plan.iterations * 17'680);
    }
    for (double l : r.result.loss_per_iteration) {
      EXPECT_TRUE(std::isfinite(l)) << mode;
    }
  }
  EXPECT_EQ(sent["ps"], 0);
  EXPECT_GT(sent["ar"], sent["hybrid"]);
}

}  // namespace
}  // namespace trainsim
