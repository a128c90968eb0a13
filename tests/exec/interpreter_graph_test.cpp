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

// 0 flatten, 1 fc1, 2 ln, 3 act, 4 fc2, 5 res = fc2 + fc1, 6 act2, 7 out.
Model residual_mlp() {
  ModelBuilder b("residual-mlp", "test", {1, 28, 28}, 8);
  const std::string fc1 = b.linear("fc1", b.flatten("flatten", kModelInput), 32);
  const std::string act = b.activation("act", "gelu", b.layernorm("ln", fc1));
  const std::string res = b.add("res", {b.linear("fc2", act, 32), fc1});
  b.linear("out", b.activation("act2", "gelu", res), 10);
  return std::move(b).build();
}

StrategyRun run(const std::string& strategy, int64_t batch, std::vector<std::pair<std::string, std::string>> settings) {
  return strategy_runs::run({.strategy = strategy, .batch = batch, .settings = std::move(settings),
                             .sgd = {0.1, 0.9, 0.0}, .image_model = residual_mlp});
}

double largest_weight_gap(const Weights& a, const Weights& b) {
  double gap = 0;
  for (size_t l = 0; l < a.size(); ++l) {
    for (size_t p = 0; p < a[l].size(); ++p) {
      for (size_t i = 0; i < a[l][p].data.size(); ++i) {
        gap = std::max(gap, static_cast<double>(std::fabs(a[l][p].data[i] - b[l][p].data[i])));
      }
    }
  }
  return gap;
}

void expect_same_training(const StrategyRun& reference, const StrategyRun& other, const std::string& what) {
  ASSERT_EQ(reference.result.loss_per_iteration.size(), other.result.loss_per_iteration.size());
  for (size_t i = 0; i < reference.result.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(other.result.loss_per_iteration[i], reference.result.loss_per_iteration[i], 1e-4)
        << what << ", iteration " << i;
  }
  EXPECT_LT(largest_weight_gap(reference.result.weights, other.result.weights), 1e-4) << what;
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

}  // namespace
}  // namespace trainsim
