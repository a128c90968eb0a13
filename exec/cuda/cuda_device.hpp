// The interpreter's GPU device (ExecOptions::make_device): a worker's
// forwards and backwards on a GPU, each over the op's layer range. The
// range's weights (those layers whose copy on the GPU holds another
// generation: Device::forward) and the boundary before it go from the host
// to the GPU,
// the range's kernels run on a stream of the worker's own (those of
// CudaNetwork: cuBLAS, cuDNN and the project's kernels), and the boundary
// after it, the parameter gradients and batch normalization's statistics
// come back; weights, optimizers and messages stay on the host. A range
// that ends the model computes its loss on the GPU beside the logits, and
// only dL/dlogits comes back (Device::forward_loss). Each forward in flight (a pipeline's micro-batches)
// keeps activations of its own on the GPU until its caches are dropped.
// Several workers may share one GPU (virtual devices: `cuda:0x4`).
// No CUDA type appears here.
#pragma once

#include <memory>

#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/device.hpp"
#include "model/layer.hpp"

namespace trainsim {

// A worker's device on GPU `gpu` for `model`. InputError naming the layer
// for a model with a layer the GPU device has no kernel for, and naming
// --devices for a GPU the driver does not have or a build without CUDA.
std::unique_ptr<Device> make_cuda_device(const Model& model, int gpu, CudaPrecision precision);

}  // namespace trainsim
