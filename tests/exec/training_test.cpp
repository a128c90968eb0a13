// train(): the test-set evaluation is optional (validate times training and
// turns it off); the training itself is the same either way.
#include "exec/training.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "exec/data/synthetic_text.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

TEST(Training, WithoutEvaluationTheSameLossesAndNoAccuracy) {
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 64, 1);
  TrainingOptions options;
  options.strategy = "dp-ring";
  options.batch_size = 16;
  options.iterations = 4;
  const TrainingResult scored = train(model, data, nominal_cpu_cluster(2), StrategyConfig{}, options);
  options.evaluate = false;
  const TrainingResult timed = train(model, data, nominal_cpu_cluster(2), StrategyConfig{}, options);
  EXPECT_GE(scored.test_accuracy, 0.0);
  EXPECT_LE(scored.test_accuracy, 1.0);
  EXPECT_TRUE(std::isnan(timed.test_accuracy));
  EXPECT_EQ(timed.exec.loss_per_iteration, scored.exec.loss_per_iteration);
  EXPECT_EQ(timed.train_loss, scored.train_loss);
}

// Across MPI ranks the nominal cluster takes the ranks' hosts as its
// machines where the ranks fill them in order, the same number on each.
TEST(NominalCpuCluster, TakesTheWorkersHostsAsItsMachinesWhereTheyFillThemInOrder) {
  const Cluster two = nominal_cpu_cluster(4, {0, 0, 1, 1});
  EXPECT_EQ(two.machines, 2);
  EXPECT_EQ(two.devices_per_machine, 2);
  EXPECT_EQ(two.name, "cpu2x2");
  const Cluster four = nominal_cpu_cluster(4, {0, 1, 2, 3});
  EXPECT_EQ(four.machines, 4);
  EXPECT_EQ(four.devices_per_machine, 1);
  for (const std::vector<int>& hosts : std::vector<std::vector<int>>{{}, {0, 0, 0, 0}, {0, 1, 0, 1}, {0, 0, 0, 1}}) {
    const Cluster one = nominal_cpu_cluster(4, hosts);
    EXPECT_EQ(one.machines, 1) << hosts.size();
    EXPECT_EQ(one.devices_per_machine, 4) << hosts.size();
  }
}

}  // namespace
}  // namespace trainsim
