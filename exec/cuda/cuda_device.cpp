// The interpreter's GPU device: the lending device (exec/tensor/
// lending_device.hpp) over CudaNetworks of the worker's GPU, passing
// boundaries device to device to the workers of its GPU and of the GPUs
// that are its peers.
#include "exec/cuda/cuda_device.hpp"

#include <utility>
#include <vector>

#include "exec/cuda/cuda_device_store.hpp"
#include "exec/tensor/lending_device.hpp"

namespace trainsim {

std::unique_ptr<Device> make_cuda_device(const Model& model, int gpu, CudaPrecision precision,
                                         std::shared_ptr<MemoryBudget> budget) {
  check_cuda_device(model, gpu, "--devices");
  CudaNetworkOptions options;
  options.precision = precision;
  options.input_gradient = true;  // a stage after the first sends dL/d(its input) back
  options.model_input_gradient = false;  // no stage sends the model input's: conv1's dx is not computed
  options.steps = false;                 // the device's store steps the weights
  options.budget = budget;
  return make_lending_device(
      [model, gpu, options](const Network& network, int64_t batch, const HeldLayers& held) {
        Weights zeros(network.layers.size());  // each lent network loads the weights it runs
        for (size_t i = 0; i < network.layers.size(); ++i) {
          if (held.computes[i] == 0) continue;
          for (const std::vector<int64_t>& shape : network.layers[i]->param_shapes()) zeros[i].emplace_back(shape);
        }
        CudaNetworkOptions own = options;
        own.held = std::make_shared<const HeldLayers>(held);  // the worker's stage alone
        return std::make_unique<CudaNetwork>(model, zeros, batch, gpu, own);
      },
      make_cuda_device_store(gpu, budget), /*shared_memory=*/gpu,
      [gpu](int64_t other) { return peer_gpus(gpu, static_cast<int>(other)); }, budget);
}

}  // namespace trainsim
