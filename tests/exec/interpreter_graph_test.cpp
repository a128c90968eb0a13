// The interpreter on a network with a residual branch: synchronous data
// parallelism equals `single` with the whole batch, and GPipe equals it too
// when its stage boundary cuts across the branch (both tensors crossing,
// packed into one message each way).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/zoo/builder.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;
using strategy_runs::batchnorm_mlp;
using strategy_runs::byte_batch;
using strategy_runs::residual_mlp;

StrategyRun run(const std::string& strategy, int64_t batch, std::vector<std::pair<std::string, std::string>> settings) {
  return strategy_runs::run({.strategy = strategy, .batch = batch, .settings = std::move(settings),
                             .sgd = {0.1, 0.9, 0.0}, .make_model = residual_mlp});
}

void expect_same_training(const StrategyRun& reference, const StrategyRun& other, const std::string& what) {
  strategy_runs::expect_same_training(reference.result, other.result, what);
}

TEST(InterpreterGraph, DataParallelEqualsSingleWithTheWholeBatch) {
  const StrategyRun single = run("single", 2 * strategy_runs::kBatch, {});
  EXPECT_GT(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  expect_same_training(single, run("dp-ring", strategy_runs::kBatch, {}), "dp-ring");
}

TEST(InterpreterGraph, GpipeAcrossTheResidualBranchEqualsSingle) {
  const StrategyRun single = run("single", strategy_runs::kBatch, {});
  // The boundary before fc2 carries fc1's output (for res) and act's.
  const StrategyRun gpipe = run("gpipe", strategy_runs::kBatch, {{"microbatches", "4"}, {"stages", "0-3,4-7"}});
  expect_same_training(single, gpipe, "gpipe, stages 0-3, 4-7");
  // Each way, per iteration: the batch's rows of 32 + 32 floats (one tensor
  // alone would be half), over 5 iterations.
  const int64_t packed_bytes = 5 * strategy_runs::kBatch * (32 + 32) * 4;
  EXPECT_EQ(gpipe.result.traffic.pair_bytes[0][1], packed_bytes);
  EXPECT_EQ(gpipe.result.traffic.pair_bytes[1][0], packed_bytes);
}

TEST(InterpreterGraph, BatchNormsRunningStatisticsComeFromTheWorkerRunningItsForward) {
  // GPipe with one micro-batch normalizes over the same batch as `single`:
  // the same losses, and the running statistics its second stage (worker 1)
  // folded in are single's, bit for bit. Both moved from their start (0, 1).
  const auto run_bn = [](const std::string& strategy, std::vector<std::pair<std::string, std::string>> settings) {
    return strategy_runs::run({.strategy = strategy, .batch = strategy_runs::kBatch, .settings = std::move(settings),
                               .sgd = {0.1, 0.9, 0.0}, .make_model = batchnorm_mlp});
  };
  const StrategyRun single = run_bn("single", {});
  const StrategyRun gpipe = run_bn("gpipe", {{"microbatches", "1"}, {"stages", "0-1,2-4"}});
  expect_same_training(single, gpipe, "gpipe, one micro-batch");
  ASSERT_EQ(single.result.statistics.size(), 5u);
  ASSERT_EQ(single.result.statistics[2].size(), 2u);
  EXPECT_NE(single.result.statistics[2][0].data, std::vector<float>(16, 0.0f));
  EXPECT_NE(single.result.statistics[2][1].data, std::vector<float>(16, 1.0f));
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(gpipe.result.statistics[2][p].data, single.result.statistics[2][p].data) << "statistic " << p;
  }
}

StrategyRun run_lm(const std::string& model, const std::string& strategy, int64_t batch,
                   std::vector<std::pair<std::string, std::string>> settings) {
  return strategy_runs::run({.strategy = strategy, .batch = batch, .settings = std::move(settings),
                             .iterations = 3, .sgd = {0.05, 0.9, 0.0},
                             .make_model = [model] { return build_zoo_model(model); }, .make_batch = byte_batch});
}

StrategyRun run_gpt(const std::string& strategy, int64_t batch, std::vector<std::pair<std::string, std::string>> settings) {
  return run_lm("fortunes-gpt", strategy, batch, std::move(settings));
}

TEST(InterpreterGraph, TheGptDecoderTrainsTheSameOnOneTwoAndPipelinedWorkers) {
  const StrategyRun single = run_gpt("single", 4, {});
  EXPECT_NEAR(single.result.loss_per_iteration.front(), std::log(256.0), 1.5);  // about uniform over bytes
  EXPECT_GT(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  expect_same_training(single, run_gpt("dp-ring", 2, {}), "dp-ring");
  // Layers 0-8 (tok, pos, block 0 up to its MLP's fc2) and 9-19: the boundary
  // cuts block 0's second residual, carrying its stream (add1) and fc2's output.
  expect_same_training(single, run_gpt("gpipe", 4, {{"microbatches", "2"}, {"stages", "0-8,9-19"}}),
                       "gpipe across a decoder block");
}

TEST(InterpreterGraph, TheResidualLstmTrainsTheSameOnOneTwoAndPipelinedWorkers) {
  const StrategyRun single = run_lm("fortunes-lstm", "single", 4, {});
  EXPECT_GT(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  expect_same_training(single, run_lm("fortunes-lstm", "dp-ring", 2, {}), "dp-ring");
  // Layers 0 tok, 1 lstm1, 2 lstm2 | 3 add, 4 head: the boundary carries both
  // LSTMs' outputs, the residual branch and its shortcut.
  expect_same_training(single, run_lm("fortunes-lstm", "gpipe", 4, {{"microbatches", "2"}, {"stages", "0-2,3-4"}}),
                       "gpipe across the residual");
}

}  // namespace
}  // namespace trainsim
