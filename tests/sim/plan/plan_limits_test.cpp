// Plans under absurd settings: a plan that would pass kMaxPlanOps, a cluster
// of more than kMaxClusterDevices, a stage count past the partition search's
// bound or queues longer than the run end in an InputError before the work
// (or are bounded), and pipesgd's drain never makes an iteration faster than
// its compute.
#include <gtest/gtest.h>

#include <string>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"
#include "tests/sim/plan/pipeline_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::chain_profile;
using testing_fixtures::generate;
using testing_fixtures::run_strategy;
using testing_fixtures::Settings;
using testing_fixtures::simple_cluster;

// The InputError message `f` throws, or "" when it does not throw.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanLimits, GpipeWithABillionMicrobatchesIsRejectedBeforeAnyOpIsWritten) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 4e6, 1'000'000'000);
  const std::string message = error_of([&] {
    generate("gpipe", profile, simple_cluster(1, 4), {{"microbatches", "1000000000"}}, 20);
  });
  EXPECT_NE(message.find("gpipe plan: would hold at least 400G ops"), std::string::npos) << message;
  EXPECT_NE(message.find("1000000000 micro-batches"), std::string::npos) << message;
}

TEST(PlanLimits, DataParallelWorkersTimesIterationsPastTheLimitAreRejected) {
  const std::string message = error_of([] {
    generate("dp-ring", chain_profile(2, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(125'000, 8), {}, 20);
  });
  EXPECT_NE(message.find("1000000 workers x 20 iterations"), std::string::npos) << message;
  EXPECT_NE(message.find("fewer --iterations or workers"), std::string::npos) << message;
}

TEST(PlanLimits, APlanOfTheMostIterationsAllowedIsWrittenAndOneMoreIsRejected) {
  // single: a forward, a backward and an update per iteration; the CLI's most iterations.
  const Plan plan = generate("single", chain_profile(1, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 1), {}, 100'000);
  EXPECT_EQ(plan.ops.size(), 300'000u);
  const std::string message = error_of([] {
    generate("single", chain_profile(1, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 1), {}, kMaxPlanIterations + 1);
  });
  EXPECT_NE(message.find("at most 100000 iterations"), std::string::npos) << message;
}

TEST(PlanLimits, AClusterOfMoreThanAMillionDevicesIsRejectedForPredictionsAndPlans) {
  const Profile profile = chain_profile(2, 1e-3, 2e-3, 1e6, 4e6);
  for (const Cluster& cluster : {simple_cluster(125'000'000, 8), simple_cluster(int64_t{1} << 62, 8)}) {
    const std::string predicted = error_of([&] { run_strategy("dp-ring", profile, cluster); });
    EXPECT_NE(predicted.find("at most 1000000 devices"), std::string::npos) << predicted;
    const std::string planned = error_of([&] { generate("dp-ring", profile, cluster); });
    EXPECT_NE(planned.find("at most 1000000 devices"), std::string::npos) << planned;
  }
  EXPECT_NO_THROW(run_strategy("dp-ring", profile, simple_cluster(125'000, 8)));
}

TEST(PlanLimits, AStageCountPastThePartitionBoundIsRejectedAndTheDefaultIsCappedWithANote) {
  // 2,000 layers: at most 1,000,000 / 2,000 = 500 stages the search places.
  const Profile profile = chain_profile(2000, 1e-4, 2e-4, 1e4, 1e4);
  const Cluster cluster = simple_cluster(128, 8);  // 1,024 devices
  const std::string message = error_of([&] { run_strategy("gpipe", profile, cluster, {{"stages", "600"}}); });
  EXPECT_NE(message.find("at most 500 stages"), std::string::npos) << message;
  const Prediction capped = run_strategy("pipedream-sync", profile, cluster);
  EXPECT_EQ(capped.config["stages"].size(), 500u);
  bool noted = false;
  for (const std::string& note : capped.notes) noted |= note.find("stages: 500 of 1024") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(PlanLimits, ReplicaCountsThatOverflowWhenSummedAreRejected) {
  const std::string message = error_of([] {
    run_strategy("gpipe", chain_profile(2, 1e-3, 2e-3, 1e6, 4e6), simple_cluster(1, 4),
                 {{"stages", "2"}, {"replicas", "9223372036854775807,2"}});
  });
  EXPECT_NE(message.find("--set replicas"), std::string::npos) << message;
}

TEST(PlanLimits, DspQueuesLongerThanTheRunWriteTheSameOpsAsQueuesOfTheRunsLength) {
  const Profile profile = chain_profile(2, 1e-3, 2e-3, 1e6, 4e6);
  const Plan huge = generate("dsp", profile, simple_cluster(1, 2), {{"queues", R"({"p": [1, 0], "m": [1000000000000, 0]})"}}, 6);
  const Plan run_long = generate("dsp", profile, simple_cluster(1, 2), {{"queues", R"({"p": [1, 0], "m": [6, 0]})"}}, 6);
  ASSERT_EQ(huge.ops.size(), run_long.ops.size());
  for (size_t i = 0; i < huge.ops.size(); ++i) {
    EXPECT_EQ(huge.ops[i].kind, run_long.ops[i].kind) << i;
    EXPECT_EQ(huge.ops[i].iteration, run_long.ops[i].iteration) << i;
  }
}

TEST(PlanLimits, PipesgdWideEnoughToEndEveryIterationInItsDrainIsRejectedBySimulation) {
  const Cluster cluster = simple_cluster(1, 4);
  const Plan plan = generate("pipesgd", chain_profile(2, 1e-3, 2e-3, 1e6, 4e6), cluster, {{"width", "20"}}, 20);
  EXPECT_EQ(plan.drain_iterations, 19);
  const std::string message = error_of([&] { simulate_plan(plan, cluster, SimOptions{}); });
  EXPECT_NE(message.find("at least 21 iterations"), std::string::npos) << message;
}

TEST(PlanLimits, PipesgdIsNeverFasterThanItsComputeWhateverItsWidth) {
  // Compute-bound: the steady state is forward + backward + update per iteration on every width.
  const Profile profile = chain_profile(2, 10e-3, 20e-3, 1e5, 4e6);
  const Cluster cluster = simple_cluster(1, 4);
  const double analytic_s = run_strategy("pipesgd", profile, cluster, {{"width", "2"}}).iteration_s;
  for (int width : {2, 5, 10, 18}) {
    const Plan plan = generate("pipesgd", profile, cluster, {{"width", std::to_string(width)}}, 20);
    const double simulated_s = simulate_plan(plan, cluster, SimOptions{}).iteration_s;
    EXPECT_NEAR(simulated_s, analytic_s, 1e-3 * analytic_s) << "width " << width;
  }
}

TEST(PlanLimits, AClosedFormWhoseIterationOverflowsIsAnInputErrorNotInfinity) {
  const std::string message =
      error_of([] { run_strategy("single", chain_profile(2, 1e308, 1e308, 1e6, 4e6), simple_cluster(1, 1)); });
  EXPECT_NE(message.find("overflows"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainsim
