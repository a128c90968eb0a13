// train(): the test-set evaluation is optional (validate times training and
// turns it off); the training itself is the same either way.
#include "exec/training.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>

#include "exec/data/synthetic_text.hpp"
#include "exec/tensor/lending_device.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "model/zoo/zoo.hpp"
#include "tests/exec/buffered_cpu_network.hpp"

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

// Trained in stretches (--checkpoint-every), each stretch makes its devices
// afresh: each worker's memory peak is still the most it held in any of
// them, not the last one's, and the traffic is every stretch's.
TEST(Training, InStretchesEachWorkersPeakIsItsMostInAnyStretchAndTheTrafficTheirSum) {
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 64, 1);
  constexpr int64_t kFirstStretchPeak = int64_t{1} << 40;  // far above what a stand-in holds
  buffered::BufferCounts counts;
  std::atomic<int> made{0};
  TrainingOptions options;
  options.strategy = "dp-ring";
  options.batch_size = 16;
  options.iterations = 4;
  options.evaluate = false;
  options.make_device = [&](int32_t worker) {
    auto budget = std::make_shared<MemoryBudget>("worker " + std::to_string(worker), -1);
    if (made++ < 2) {  // the first stretch's two workers once held far more
      budget->charge(kFirstStretchPeak);
      budget->release(kFirstStretchPeak);
    }
    return make_lending_device(
        [&counts, budget](const Network& n, int64_t batch, const HeldLayers& held) {
          const ChargeTo charge(budget);
          return std::make_unique<buffered::BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
        },
        nullptr, -1, nullptr, budget);
  };
  made = 2;  // run whole, no worker had the far peak
  const TrainingResult whole = train(model, data, nominal_cpu_cluster(2), StrategyConfig{}, options);
  options.checkpoint_every = 2;
  made = 0;
  const TrainingResult stretched = train(model, data, nominal_cpu_cluster(2), StrategyConfig{}, options);
  ASSERT_EQ(made.load(), 4);  // two workers per stretch
  EXPECT_EQ(stretched.exec.loss_per_iteration, whole.exec.loss_per_iteration);
  ASSERT_EQ(stretched.exec.memory.size(), 2u);
  ASSERT_EQ(whole.exec.memory.size(), 2u);
  for (int w = 0; w < 2; ++w) {
    EXPECT_GT(whole.exec.memory[w].peak_bytes, 0);
    EXPECT_LT(whole.exec.memory[w].peak_bytes, kFirstStretchPeak);
    EXPECT_EQ(stretched.exec.memory[w].peak_bytes, kFirstStretchPeak);
  }
  ASSERT_EQ(stretched.exec.traffic.pair_bytes.size(), 2u);
  for (int w = 0; w < 2; ++w) {
    EXPECT_GT(whole.exec.traffic.sent_bytes(w), 0);
    EXPECT_EQ(stretched.exec.traffic.sent_bytes(w), whole.exec.traffic.sent_bytes(w));
  }
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
