// The interpreter's GPU device (ExecOptions::make_device): a worker's
// forwards and backwards on a GPU, each over the op's layer range, as the
// lending device runs them (exec/tensor/lending_device.hpp) on CudaNetworks:
// a network lent to each pass of the worker (an iteration's micro-batch)
// keeps the pass's activations and boundaries on the GPU, an op's input
// read in place where the op before left it and brought to the host only
// to be sent; the range's weights go up only for the layers whose copy on
// the GPU holds another generation (Device::forward); the loss is computed
// on the GPU; the parameter gradients sum on the GPU (a DeviceStore) over
// the worker's micro-batches and ranges until the host reads them
// (Device::gradients_to_host: one wait for an op's whole range), the
// update steps a dense range's weights and velocity there (Device::step;
// the host's copy comes back by Device::weights_to_host where the host
// reads it), batch normalization's running statistics fold there after
// each forward (back with the weights), and messages stay on the host. Each
// range's kernels run on the network's stream (cuBLAS, cuDNN and the
// project's kernels). Several workers may share one GPU (virtual devices:
// `cuda:0x4`). A boundary sent to a worker of the same GPU, or of a GPU
// with peer access both ways (peer_gpus), goes device to device; to
// another, by the transport where it passes arrays (NCCL's send and
// receive: make_nccl_transport, or the MPI launch's member), else through
// the host. No CUDA type appears here.
#pragma once

#include <memory>

#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/device.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "model/layer.hpp"

namespace trainsim {

// A worker's device on GPU `gpu` for `model`. InputError naming the layer
// for a model with a layer the GPU device has no kernel for, and naming
// --devices for a GPU the driver does not have or a build without CUDA.
// What its networks and store allocate charges `budget` (a virtual
// worker's share of the GPU; its peak is Device::memory_use's).
std::unique_ptr<Device> make_cuda_device(const Model& model, int gpu, CudaPrecision precision,
                                         std::shared_ptr<MemoryBudget> budget = nullptr);

}  // namespace trainsim
