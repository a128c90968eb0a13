// Parallax across machines (seed 004 §3): a server per machine owning a
// share of every served variable, pushes and pulls between machines, the
// local aggregation of a machine's rows; in every mode it trains as one
// worker with the whole batch, and moves between machines what the plan
// says: shares of rows, never the table.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using namespace strategy_runs;

constexpr int32_t kIterations = 5;

StrategyRun parallax(int32_t machines, int32_t per_machine,
                     std::vector<std::pair<std::string, std::string>> settings) {
  return run({.strategy = "parallax", .settings = std::move(settings), .iterations = kIterations,
              .sgd = kMomentum, .text = true, .machines = machines, .per_machine = per_machine});
}

StrategyRun single(int64_t batch) {
  return run({.strategy = "single", .batch = batch, .iterations = kIterations, .sgd = kMomentum, .text = true});
}

// Bytes the workers of different machines sent each other.
int64_t between_machines(const TrafficStats& t, int32_t per_machine) {
  int64_t bytes = 0;
  for (size_t from = 0; from < t.pair_bytes.size(); ++from) {
    for (size_t to = 0; to < t.pair_bytes.size(); ++to) {
      if (from / static_cast<size_t>(per_machine) != to / static_cast<size_t>(per_machine)) {
        bytes += t.pair_bytes[from][to];
      }
    }
  }
  return bytes;
}

TEST(ParallaxAcrossMachines, EveryModeTrainsAsOneWorkerWithTheWholeBatch) {
  for (const auto& [machines, per_machine] : std::vector<std::pair<int32_t, int32_t>>{{2, 2}, {2, 1}, {3, 1}}) {
    const StrategyRun whole = single(kBatch * machines * per_machine);
    EXPECT_NE(whole.result.loss_per_iteration.front(), whole.result.loss_per_iteration.back());
    for (const std::string mode : {"hybrid", "ps", "ar"}) {
      for (const std::string aggregation : {"true", "false"}) {
        const std::string what = std::to_string(machines) + " x " + std::to_string(per_machine) + ", " + mode +
                                 ", local_aggregation=" + aggregation;
        const StrategyRun r = parallax(machines, per_machine, {{"mode", mode}, {"local_aggregation", aggregation}});
        ASSERT_EQ(r.plan.workers.size(), static_cast<size_t>(machines * per_machine)) << what;
        expect_same_training(whole.result, r.result, what);
      }
    }
  }
}

TEST(ParallaxAcrossMachines, MachinesExchangeShareOfRowsNotTheTable) {
  // Hybrid on 2 machines of 1: the dense 4,420 floats by the ring (17,680
  // bytes each way per iteration); the rows by the servers. A batch of 8
  // bags of 32 tokens touches at most 256 rows: per iteration a machine
  // pushes the other's share of them (2 floats per index, 64 values) with
  // the rows it wants (2 floats each) and gets their values back, with a
  // few counts: far below the 50,000 x 64 table (12.8 MB).
  const StrategyRun two = parallax(2, 1, {});
  const TrafficStats& t = two.result.traffic;
  ASSERT_EQ(t.pair_bytes.size(), 2u);
  for (int w = 0; w < 2; ++w) {
    const int64_t sent = t.pair_bytes[static_cast<size_t>(w)][static_cast<size_t>(1 - w)];
    EXPECT_GT(sent, kIterations * 17'680 + 256 * 4) << w;
    EXPECT_LE(sent, kIterations * (17'680 + 256 * (66 + 2 + 66) * 4 + 100)) << w;
  }
  // One machine of 2: the server is the host's; nothing but the ring crosses.
  const StrategyRun one = parallax(1, 2, {});
  EXPECT_EQ(one.result.traffic.pair_bytes[0][1], kIterations * 17'680);
  EXPECT_EQ(one.result.traffic.pair_bytes[1][0], kIterations * 17'680);
}

TEST(ParallaxAcrossMachines, LocalAggregationSendsAMachinesRowsOnce) {
  // 2 machines of 2: aggregated, a machine's two workers' rows go summed
  // from its host (rows both touched once); without, each worker sends its own.
  const StrategyRun aggregated = parallax(2, 2, {{"local_aggregation", "true"}});
  const StrategyRun separate = parallax(2, 2, {{"local_aggregation", "false"}});
  const int64_t once = between_machines(aggregated.result.traffic, 2);
  const int64_t each = between_machines(separate.result.traffic, 2);
  EXPECT_GT(once, 0);
  EXPECT_LT(once, each);
  // Worker 1 sends worker 2 its ring's share of the AllReduce, and its
  // rows too unless its host sends them; to its host's worker 0, nothing
  // (the ring runs 0, 1, 2, 3): its copy is host memory.
  EXPECT_LT(aggregated.result.traffic.pair_bytes[1][2], separate.result.traffic.pair_bytes[1][2]);
  EXPECT_EQ(aggregated.result.traffic.pair_bytes[1][0], 0);
  EXPECT_EQ(separate.result.traffic.pair_bytes[1][0], 0);
}

TEST(ParallaxAcrossMachines, ParameterServerModeMovesNoAllReduce) {
  // ps on one machine of 2: every variable through the host's server, no
  // message between the workers; on 2 machines of 1, shares of the dense
  // 4,420 floats each way: half of them pushed and half pulled, each iteration.
  const StrategyRun one = parallax(1, 2, {{"mode", "ps"}});
  EXPECT_EQ(one.result.traffic.pair_bytes[0][1] + one.result.traffic.pair_bytes[1][0], 0);
  const StrategyRun two = parallax(2, 1, {{"mode", "ps"}});
  for (int w = 0; w < 2; ++w) {
    EXPECT_GE(two.result.traffic.pair_bytes[static_cast<size_t>(w)][static_cast<size_t>(1 - w)],
              kIterations * 2 * 2'210 * 4)
        << w;
  }
}

TEST(ParallaxAcrossMachines, ResumedFromACheckpointTrainsOnAsUnstopped) {
  // Both servers' shares (weights and momentum) go into the state and back.
  for (const std::string mode : {"hybrid", "ps"}) {
    const RunSpec spec{.strategy = "parallax", .settings = {{"mode", mode}}, .iterations = 4, .sgd = kMomentum,
                       .text = true, .machines = 2, .per_machine = 1};
    RunSpec half = spec;
    half.iterations = 2;
    const StrategyRun whole = run(spec);
    const StrategyRun first = execute(half, plan_of(half), 0, nullptr, true);
    const StrategyRun second = execute(half, plan_of(half), 2, &first.result.state);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(second.result.loss_per_iteration[i], whole.result.loss_per_iteration[i + 2], 1e-5) << mode << i;
    }
    EXPECT_LT(largest_weight_gap(second.result.weights, whole.result.weights), 1e-5) << mode;
  }
}

}  // namespace
}  // namespace trainsim
