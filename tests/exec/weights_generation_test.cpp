// The generations the interpreter gives a worker's device with its weights
// (Device::forward): a CPU device that computes with a copy of its own, as
// the GPU device does, loading a layer only when its copy holds another
// generation (LoadedWeights), trains every strategy bit for bit as the CPU
// device on the weights as given, while loading fewer layers than it is
// given. LoadedWeights by hand.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exec/tensor/device.hpp"
#include "tests/exec/cpu_device_wrapper.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

// Layers a run's devices were given with parameters, and those they loaded.
struct LoadCounts {
  std::mutex mu;
  int64_t given = 0;
  int64_t loaded = 0;
};

// Computes on its own copy of the weights, as a GPU keeps them.
class CopyingDevice final : public CpuDeviceWrapper {
 public:
  CopyingDevice(const Network& network, LoadCounts& counts)
      : copy_(zero_weights_like(network)), loaded_(network.layers.size()), counts_(counts) {}

  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    load(weights, generation, first, last);
    return CpuDeviceWrapper::forward(network, copy_, generation, pass, first, last, std::move(x), caches);
  }
  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override {
    load(weights, generation, first, last);
    return CpuDeviceWrapper::backward(network, copy_, generation, pass, first, last, std::move(dy), caches, grads);
  }

 private:
  static Weights zero_weights_like(const Network& network) {
    Weights w(network.layers.size());
    for (size_t l = 0; l < network.layers.size(); ++l) {
      for (const std::vector<int64_t>& shape : network.layers[l]->param_shapes()) w[l].emplace_back(shape);
    }
    return w;
  }

  void load(const Weights& weights, WeightsGeneration generation, int64_t first, int64_t last) {
    const std::vector<int64_t> stale = loaded_.stale(weights, generation, first, last);
    for (const int64_t l : stale) copy_[static_cast<size_t>(l)] = weights[static_cast<size_t>(l)];
    loaded_.loaded(stale, generation);
    int64_t given = 0;
    for (int64_t l = first; l <= last; ++l) given += weights[static_cast<size_t>(l)].empty() ? 0 : 1;
    std::lock_guard lock(counts_.mu);
    counts_.given += given;
    counts_.loaded += static_cast<int64_t>(stale.size());
  }

  Weights copy_;
  LoadedWeights loaded_;
  LoadCounts& counts_;
};

class WeightsGenerations : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(WeightsGenerations, ADeviceLoadingOnlyNewGenerationsTrainsAsTheWeightsGiven) {
  const RunSpec& spec = GetParam().spec;
  const Network network = build_network(strategy_runs::model_of(spec));
  LoadCounts counts;
  RunSpec copying = spec;
  copying.make_device = [&](int32_t) { return std::make_unique<CopyingDevice>(network, counts); };
  const StrategyRun reference = strategy_runs::run(spec);
  const StrategyRun run = strategy_runs::run(copying);
  EXPECT_EQ(run.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(strategy_runs::largest_weight_gap(run.result.weights, reference.result.weights), 0.0);
  // A backward reads the generation its forward loaded, unless every op
  // reads a prediction (SpecTrain), which is loaded each time.
  EXPECT_GT(counts.given, 0);
  const bool predicts = GetParam().name == "dualpipe_spectrain";
  if (predicts) {
    EXPECT_EQ(counts.loaded, counts.given);
  } else {
    EXPECT_LT(counts.loaded, counts.given);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, WeightsGenerations, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

Weights three_layers() {
  Weights w(3);
  w[0].emplace_back(std::vector<int64_t>{2});
  w[2].emplace_back(std::vector<int64_t>{3});  // layer 1 has no parameters
  return w;
}

TEST(LoadedWeights, LoadsALayerOnlyWhenItsCopyHoldsAnotherGeneration) {
  const Weights w = three_layers();
  LoadedWeights loaded(3);
  EXPECT_EQ(loaded.stale(w, 5, 0, 2), (std::vector<int64_t>{0, 2}));  // nothing loaded yet
  loaded.loaded(std::vector<int64_t>{0}, 5);
  EXPECT_EQ(loaded.stale(w, 5, 0, 2), (std::vector<int64_t>{2}));
  EXPECT_EQ(loaded.stale(w, 5, 0, 0), (std::vector<int64_t>{}));
  EXPECT_EQ(loaded.stale(w, 6, 0, 0), (std::vector<int64_t>{0}));  // a newer generation
  loaded.loaded(std::vector<int64_t>{0, 2}, 6);
  EXPECT_EQ(loaded.stale(w, 6, 0, 2), (std::vector<int64_t>{}));
  EXPECT_EQ(loaded.stale(w, 5, 2, 2), (std::vector<int64_t>{2}));  // an older one (a stash)
}

TEST(LoadedWeights, UnversionedWeightsAreLoadedEveryTime) {
  const Weights w = three_layers();
  LoadedWeights loaded(3);
  loaded.loaded(std::vector<int64_t>{0, 2}, kUnversionedWeights);
  EXPECT_EQ(loaded.stale(w, kUnversionedWeights, 0, 2), (std::vector<int64_t>{0, 2}));
}

TEST(LoadedWeights, SkipsTheLayersAStashDoesNotCarry) {
  Weights stash = three_layers();
  stash[0].clear();  // no reader of layer 0's parameters is left
  const LoadedWeights loaded(3);
  EXPECT_EQ(loaded.stale(stash, 4, 0, 2), (std::vector<int64_t>{2}));
}

TEST(LoadedWeights, RefusesARangeOutsideTheWeights) {
  const LoadedWeights loaded(3);
  EXPECT_THROW(loaded.stale(three_layers(), 1, 1, 3), std::exception);
  EXPECT_THROW(loaded.stale(Weights(2), 1, 0, 1), std::exception);
}

}  // namespace
}  // namespace trainsim
