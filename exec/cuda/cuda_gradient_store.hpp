// Where the GPU device keeps its workers' parameter-gradient sums: device
// memory on one GPU, which every CudaNetwork of that GPU adds into, brought
// to the host together through pinned memory (GradientStore,
// exec/tensor/range_network.hpp). No CUDA type appears here.
#pragma once

#include <memory>

#include "exec/tensor/range_network.hpp"

namespace trainsim {

// The store of GPU `gpu`: sums zeroed and brought back on a stream of its
// own, their buffers reused once let go.
std::shared_ptr<GradientStore> make_cuda_gradient_store(int gpu);

}  // namespace trainsim
