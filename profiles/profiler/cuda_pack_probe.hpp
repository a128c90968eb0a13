// Inside profiles/profiler: what the executor's GPU workers do around a
// collective the host runs, timed for measure_cuda_cluster's
// collective.pack_bytes_per_s and pack_latency_s, and the probe's
// wall-clock sweep of a message. Built with CUDA only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"

namespace trainsim {

// The packing's fixed part and rate: fit_packing through the median times of
// one worker's packing of a gradient of 256 bytes and of gradient_bytes
// around an AllReduce (exec/interpreter/collective_ops.cpp), `workers`
// threads at once on GPU `device`, each with a stream, a device gradient
// and pinned buffers of its own: the gradient copied down through pinned
// memory and waited for (Device::gradients_to_host), added into its host
// values, flattened into one buffer, scaled by the mean and unflattened,
// then copied into pinned memory and up (the step's DeviceStore::
// from_host_all), waited for. The ring between them is not in it.
// The copies' waits are the fixed part (latency_s), the same for a bucket
// as for the whole gradient.
ChannelFit measure_cuda_packing(int device, int64_t workers, int64_t gradient_bytes, const CudaProbeOptions& o);
// The same, worker w on GPU gpu_of_worker[w] (a GPU each: cuda:G,H,...).
ChannelFit measure_cuda_packing(const std::vector<int>& gpu_of_worker, int64_t gradient_bytes,
                                const CudaProbeOptions& o);

// Per message size, min_message_bytes ×4 up to max_message_bytes: the
// median wall time of `message(bytes)` over `repeats` after `warmups`, the
// current GPU idle before the first (cuda_cluster_probe.cu).
std::vector<ChannelSample> wall_clock_sweep(const CudaProbeOptions& o, const std::function<void(size_t)>& message);

// The most workers whose collectives this machine's host threads can run
// (max_worker_threads: 4 per core); timing.hpp, out of CUDA's C++ standard.
int64_t host_worker_threads();

}  // namespace trainsim
