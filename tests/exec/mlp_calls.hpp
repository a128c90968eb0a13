// fmnist-mlp's calls of a lending device over the CPU stand-in network
// (buffered_cpu_network.hpp), as the interpreter makes them.
#pragma once

#include <memory>
#include <vector>

#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim::buffered {

// fmnist-mlp (0 flatten, 1 fc1, 2 relu1, 3 fc2, 4 relu2, 5 fc3, 6 softmax)
// at batch 8, called as the interpreter calls a device.
struct MlpCalls {
  Network network = build_network(build_zoo_model("fmnist-mlp"));
  Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  Tensor x;
  std::vector<int32_t> labels;
  BufferCounts counts;
  std::unique_ptr<Device> device = make_lending_device([this](const Network& n, int64_t batch, const HeldLayers& held) {
    return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
  });
  MlpCalls() { strategy_runs::synthetic_batch(0, 8, x, labels); }
};

}  // namespace trainsim::buffered
