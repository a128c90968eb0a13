// Where the GPU device keeps its workers' parameter-gradient sums, the
// weights and velocities it steps, and the stashed copies of those weights
// (a weight version PipeDream's later passes read): device memory on one GPU, which every
// CudaNetwork of that GPU adds into or loads from, brought to the host
// together through pinned memory (DeviceStore, exec/tensor/
// range_network.hpp). No CUDA type appears here.
#pragma once

#include <memory>

#include "exec/tensor/memory_budget.hpp"
#include "exec/tensor/range_network.hpp"

namespace trainsim {

// The store of GPU `gpu`: arrays zeroed, filled, copied and stepped on a
// stream of its own and brought back on a second one, their buffers
// reused once let go; its new buffers charge `budget` (a virtual worker's).
std::shared_ptr<DeviceStore> make_cuda_device_store(int gpu, std::shared_ptr<MemoryBudget> budget = nullptr);

// Whether GPUs `a` and `b` (a != b) read each other's memory: peer access
// both ways, enabled at the first ask of the pair; false where either way
// is missing or will not enable (and in a build without CUDA). A store of
// one copies the other's arrays in (DeviceStore::copy) device to device.
bool peer_gpus(int a, int b);

}  // namespace trainsim
