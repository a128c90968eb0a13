// A worker's memory budget (exec/tensor/memory_budget.hpp): what its
// device's networks and store take charges it, a charge past its limit
// stops the run with one line naming the worker, and the most each worker
// held comes back with the run (ExecResult::memory), as on the GPU device;
// here over the CPU stand-ins of a GPU network and store, which charge
// what they hold as a GPU's arrays would.
#include "exec/tensor/memory_budget.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using strategy_runs::case_named;
using strategy_runs::RunSpec;

TEST(MemoryBudget, ChargesReleasesAndKeepsThePeak) {
  MemoryBudget budget("worker 0", 100);
  budget.charge(60);
  budget.charge(40);
  budget.release(70);
  budget.charge(20);
  EXPECT_EQ(budget.held(), 50);
  EXPECT_EQ(budget.peak(), 100);
  EXPECT_EQ(budget.limit(), 100);
  budget.release(51);  // more than held: down to zero, not below
  EXPECT_EQ(budget.held(), 0);
  MemoryBudget counting("worker 1", -1);
  counting.charge(int64_t{1} << 40);
  EXPECT_EQ(counting.peak(), int64_t{1} << 40);
}

TEST(MemoryBudget, RefusesAChargePastItsLimitNamingItsOwner) {
  MemoryBudget budget("worker 2 of cuda:0x4", 1 << 20, "1/4 of cuda:0's 4.0 MiB");
  budget.charge(1 << 19);
  try {
    budget.charge((1 << 19) + 1);
    FAIL() << "a charge past the limit";
  } catch (const MemoryBudgetExceeded& e) {
    EXPECT_EQ(e.where(), "--devices");
    EXPECT_NE(e.problem().find("worker 2 of cuda:0x4 would hold"), std::string::npos) << e.problem();
    EXPECT_NE(e.expected().find("1.0 MiB: 1/4 of cuda:0's 4.0 MiB"), std::string::npos) << e.expected();
  }
  EXPECT_EQ(budget.held(), 1 << 19);  // nothing charged
}

// The GPU full before the worker's share (its context, libraries, other
// processes): the same refusal, naming the worker, the GPU and the bytes.
TEST(MemoryBudget, AGpuFullBeforeTheShareIsRefusedAsAChargePastIt) {
  MemoryBudget budget("worker 1 of cuda:0x2", 1 << 20);
  budget.charge(1 << 18);
  try {
    budget.refuse_unavailable(1 << 10, "cuda:0");
    FAIL() << "no refusal";
  } catch (const MemoryBudgetExceeded& e) {
    EXPECT_EQ(e.where(), "--devices");
    EXPECT_NE(e.problem().find("worker 1 of cuda:0x2 holds 256.0 KiB of its 1.0 MiB share, and cuda:0 has no room "
                               "for 1.0 KiB more"),
              std::string::npos)
        << e.problem();
  }
  EXPECT_EQ(budget.held(), 1 << 18);
  MemoryBudget alone("worker 0 of cuda:0", -1);
  try {
    alone.refuse_unavailable(1 << 10, "cuda:0");
    FAIL() << "no refusal";
  } catch (const MemoryBudgetExceeded& e) {
    EXPECT_NE(e.problem().find("worker 0 of cuda:0 holds 0 B, and cuda:0 has no room"), std::string::npos)
        << e.problem();
  }
}

TEST(MemoryBudget, AScopeChargesWhatItsOwnThreadMakes) {
  auto outer = std::make_shared<MemoryBudget>("outer", -1);
  auto inner = std::make_shared<MemoryBudget>("inner", -1);
  EXPECT_EQ(ChargeTo::current(), nullptr);
  {
    const ChargeTo a(outer);
    EXPECT_EQ(ChargeTo::current(), outer);
    {
      const ChargeTo b(inner);
      EXPECT_EQ(ChargeTo::current(), inner);
      std::thread([] { EXPECT_EQ(ChargeTo::current(), nullptr); }).join();
    }
    EXPECT_EQ(ChargeTo::current(), outer);
  }
  EXPECT_EQ(ChargeTo::current(), nullptr);
}

// Each worker's device over the stand-ins, charging `budgets[worker]`.
void on_budgets(RunSpec& spec, BufferCounts& counts, const std::vector<std::shared_ptr<MemoryBudget>>& budgets) {
  spec.make_device = [&counts, budgets](int32_t worker) {
    const std::shared_ptr<MemoryBudget>& budget = budgets.at(static_cast<size_t>(worker));
    return make_lending_device(
        [&counts, budget](const Network& n, int64_t batch, const HeldLayers& held) {
          const ChargeTo charge(budget);
          return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
        },
        std::make_shared<CountingStore>(counts, -1, budget), -1, nullptr, budget);
  };
}

// Every worker's peak comes back with the run; and as the schedules hold
// activations, 1F1B's first stage (at most as many micro-batches in flight
// as stages: two networks lent at once) holds less than GPipe's (all four
// micro-batches' forwards before their backwards: four).
TEST(MemoryBudget, EachWorkersPeakComesBackWithTheRun) {
  std::map<std::string, int64_t> first_stage;
  for (const std::string name : {"gpipe", "one_f_one_b"}) {
    SCOPED_TRACE(name);
    RunSpec spec = case_named(name);
    spec.settings = {{"microbatches", "4"}};
    BufferCounts counts;
    std::vector<std::shared_ptr<MemoryBudget>> budgets;
    for (int w = 0; w < 2; ++w) budgets.push_back(std::make_shared<MemoryBudget>("worker " + std::to_string(w), -1));
    on_budgets(spec, counts, budgets);
    const strategy_runs::StrategyRun run = strategy_runs::run(spec);
    ASSERT_EQ(run.result.memory.size(), 2u);
    for (const Device::MemoryUse& m : run.result.memory) {
      EXPECT_GT(m.peak_bytes, 0);
      EXPECT_EQ(m.limit_bytes, -1);
    }
    first_stage[name] = run.result.memory.front().peak_bytes;
    for (const auto& b : budgets) EXPECT_EQ(b->held(), 0);  // all given back with the devices
  }
  EXPECT_LT(first_stage["one_f_one_b"], first_stage["gpipe"]);
}

// A network that would pass the worker's share is made once what the
// device keeps for reuse goes: here an idle network of another batch size.
TEST(MemoryBudget, ANetworkPastTheShareIsMadeOnceIdleNetworksGo) {
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  const Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  BufferCounts counts, probes;
  const auto bytes_of = [&](int64_t batch) {  // a stand-in network's, as the device makes it
    auto probe = std::make_shared<MemoryBudget>("probe", -1);
    const ChargeTo charge(probe);
    const BufferedCpuNetwork made(network, batch, probes);
    return probe->held();
  };
  const int64_t four = bytes_of(4), eight = bytes_of(8);
  auto budget = std::make_shared<MemoryBudget>("worker 0", eight + four / 2);  // room for one of them
  // Each network made after a block of its size, kept: the network let go
  // goes to the block, so the new one is not where it was (were it there,
  // a note of the old one would pass for the new one).
  std::vector<std::unique_ptr<std::byte[]>> spacers;
  std::unique_ptr<Device> device = make_lending_device(
      [&](const Network& n, int64_t batch, const HeldLayers& held) {
        const ChargeTo charge(budget);
        spacers.push_back(std::make_unique<std::byte[]>(sizeof(BufferedCpuNetwork)));
        return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
      },
      nullptr, -1, nullptr, budget);
  Tensor x4, x8;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, 4, x4, labels);
  strategy_runs::synthetic_batch(0, 8, x8, labels);
  {
    std::vector<LayerCache> caches;
    device->forward(network, weights, 1, PassId{0, 0}, 0, 2, x4, caches);
  }  // the pass ended: its network idle
  EXPECT_EQ(budget->held(), four);
  std::vector<LayerCache> caches;
  EXPECT_NO_THROW(device->forward(network, weights, 1, PassId{1, 0}, 0, 2, x8, caches));
  EXPECT_EQ(budget->held(), eight);
  EXPECT_EQ(counts.networks, 2);
  EXPECT_EQ(device->memory_use().peak_bytes, eight);
  // The first network, let go, is not one the second's work queues after
  // (the stand-in refuses to queue after a network let go).
  EXPECT_TRUE(counts.queued_after.empty());
}

// A store's array past the share is made once the device's idle networks
// go (a network still lent stays, and the array is then refused).
TEST(MemoryBudget, AStoresArrayPastTheShareIsMadeOnceIdleNetworksGo) {
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  const Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  BufferCounts counts;
  auto probe = std::make_shared<MemoryBudget>("probe", -1);
  {
    const ChargeTo charge(probe);
    const BufferedCpuNetwork made(network, 4, counts);
  }
  const int64_t network_bytes = probe->peak();
  const int64_t floats = network_bytes / 8;  // half a network's bytes
  auto budget = std::make_shared<MemoryBudget>("worker 0", network_bytes + network_bytes / 4);
  auto store = std::make_shared<CountingStore>(counts, -1, budget);
  std::unique_ptr<Device> device = make_lending_device(
      [&](const Network& n, int64_t batch, const HeldLayers& held) {
        const ChargeTo charge(budget);
        return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
      },
      store, -1, nullptr, budget);
  Tensor x;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, 4, x, labels);
  {
    std::vector<LayerCache> caches;
    device->forward(network, weights, 1, PassId{0, 0}, 0, 2, x, caches);
    EXPECT_THROW(store->zeros(floats), MemoryBudgetExceeded);  // its network still lent
    EXPECT_EQ(budget->held(), network_bytes);
  }  // the pass ended: its network idle
  const std::shared_ptr<KeptValues> array = store->zeros(floats);
  EXPECT_EQ(budget->held(), 4 * floats);
  EXPECT_TRUE(counts.alive.empty());
}

// With its peak as its limit the run goes through; a byte less and it
// stops with the budget's line, naming the worker.
TEST(MemoryBudget, ARunPastAWorkersLimitStopsNamingIt) {
  RunSpec spec = case_named("single");
  BufferCounts counts;
  const auto limited = [](int64_t limit) {  // worker 0's; any other's unlimited
    return std::vector<std::shared_ptr<MemoryBudget>>{std::make_shared<MemoryBudget>("worker 0 of cuda:0x2", limit),
                                                      std::make_shared<MemoryBudget>("worker 1", -1)};
  };
  on_budgets(spec, counts, limited(-1));
  const int64_t peak = strategy_runs::run(spec).result.memory.front().peak_bytes;
  ASSERT_GT(peak, 0);
  on_budgets(spec, counts, limited(peak));
  EXPECT_EQ(strategy_runs::run(spec).result.memory.front().peak_bytes, peak);
  on_budgets(spec, counts, limited(peak - 1));
  try {
    strategy_runs::run(spec);
    FAIL() << "a run past its worker's limit";
  } catch (const MemoryBudgetExceeded& e) {
    EXPECT_NE(e.problem().find("worker 0 of cuda:0x2 would hold"), std::string::npos) << e.problem();
  }
}

}  // namespace
}  // namespace trainsim
