// Measures one NVIDIA GPU as a cluster of virtual workers sharing it
// (`trainsim.cluster/1`): its compute, memory and copy rates, timed with the
// CUDA runtime and cuBLAS. Declared in every build; without CUDA it throws.
#pragma once

#include <cstdint>
#include <vector>

#include "profiles/cluster.hpp"

namespace trainsim {

// The most virtual workers one GPU is measured as (cuda:NxW).
inline constexpr int64_t kMaxCudaWorkers = 64;

struct CudaProbeOptions {
  int64_t repeats = 5;             // timed runs per measurement (median)
  int64_t warmups = 2;             // untimed runs before them
  int64_t gemm_size = 4096;        // n of each worker's n×n×n fp32 SGEMM
  int64_t copy_bytes = 256 << 20;  // each worker's device-to-device copy
  int64_t min_message_bytes = 4;   // copy sweeps, ×4 steps
  int64_t max_message_bytes = 64 << 20;
  int64_t reduce_bytes = 64 << 20;  // one buffer of the float sums a += b (GPU and host)
  int64_t sync_repeats = 200;       // launch + synchronize round trips timed
  int64_t gradient_bytes = 4 << 20;  // a worker's gradient per collective (the model's, where known)
};

// One machine, devices_per_machine = workers, shared_devices = 1 where
// workers > 1 (the simulator shares the GPU among the workers' compute;
// `profile --cluster-out` adds the model's compute_rate_while_shared),
// device kind "gpu"; "at once"
// means `workers` operations issued together, one per CUDA stream, timed with
// CUDA events from the first one's start to the last one's end (so with W
// workers each gets about 1/W of the GPU); every time is the median of
// `repeats` after `warmups`:
//   device.name = the CUDA device's name; memory_bytes = totalGlobalMem / workers;
//   peak_flops_per_s = 2n³ / time of an n×n×n cuBLAS SGEMM (n = gemm_size,
//     CUBLAS_DEFAULT_MATH: fp32 arithmetic, TF32 off), one worker alone;
//   memory_bytes_per_s = 2·copy_bytes / time of a device-to-device copy of
//     copy_bytes (read + write, STREAM's convention), one worker alone (a
//     virtual worker's rates are the GPU's when it computes alone; the
//     simulator shares them among the workers computing at once, so rates
//     divided here would count the sharing twice);
//   compute_rate_while_communicating = 1 (copy engines move the bytes);
//   handoff_s = 0 (launches are asynchronous);
//   intra_link = inter_link = fit_channel of what a boundary between two
//     of the executor's workers on the GPU costs, min_message_bytes ×4 up
//     to max_message_bytes, each timed alone by the wall clock: a device
//     copy from one buffer into an array on one stream (the sender's
//     Device::export_boundary), an event, and a device copy from the array
//     into another buffer on a second stream waiting for it (the
//     receiver's range input), until that copy is done;
//   host.link_bandwidth_bytes_per_s, host.link_latency_s = fit_channel of the
//     same sweep of pinned (cudaMallocHost) host-to-device and device-to-host
//     copies, each timed alone with events on one stream: the lower bandwidth
//     and the larger latency of the two directions;
//   host.reduce_bytes_per_s = reduce_bytes / time of a += b over reduce_bytes
//     of floats on host.threads threads, each summing its slice (all threads
//     together, from their common start to the last one's end);
//   host.threads = std::thread::hardware_concurrency (at least 1);
//   host.stream_sync_s = median wall time (steady_clock) of an empty
//     kernel's launch and cudaStreamSynchronize, over sync_repeats round
//     trips;
//   collective, where workers > 1: what the executor's collectives between
//     the workers cost. They run on the host (the in-process transport's
//     ring), each worker's gradient copied down before and up after:
//     hop_bytes_per_s, hop_latency_s, reduce_bytes_per_s and sync_s by
//     measure_host_collective (cluster_probe.hpp) over gradient_bytes, and
//     pack_bytes_per_s and pack_latency_s by measure_cuda_packing
//     (cuda_pack_probe.hpp): the copies down and up and the packing
//     between them, once per collective where a hop through the host would
//     charge them per hop, its waits a fixed part of every call;
//   collective, for one worker (no collective between workers; what a
//     collective on the GPU would cost): reduce_bytes_per_s = reduce_bytes
//     / time of an on-device a += b kernel over reduce_bytes; sync_s =
//     host.stream_sync_s (NCCL's own fixed cost per call is not in it);
//     pack_bytes_per_s = pack_latency_s = 0 (read in place).
// name "cuda<workers>-measured"; the description names the GPU, its SM
// count, the CUDA runtime and driver versions and what was measured.
// InputError naming --device when workers is outside [1, kMaxCudaWorkers],
// when `device` is not in [0, number of CUDA devices), when no GPU or driver
// answers, or (built without CUDA) always; CudaError naming the call
// when a CUDA or cuBLAS call fails (out of device memory, for one).
Cluster measure_cuda_cluster(int device, int64_t workers, const CudaProbeOptions& options = {});

// GPUs `gpus` (two or more, a worker each: cuda:G,H,...) as one machine's
// cluster: measure_cuda_cluster of the first GPU alone (its rates, the
// host's, the launch; the others taken to be alike), then
// devices_per_machine = the GPUs, shared_devices = 0, and
//   intra_link = inter_link = fit_channel of what a boundary between the
//     workers of the first two GPUs costs, swept as measure_cuda_cluster's
//     and timed alone by the wall clock: where the two are peers
//     (peer_gpus), a device copy into an array on the sender's GPU, an
//     event, the receiver's copy of the array onto its GPU
//     (cudaMemcpyPeerAsync) and from there into its input, until done;
//     else, where NCCL opens, the NCCL transport's path: a copy into an
//     array of the sender's store, NCCL's send and receive into one of the
//     receiver's, and a copy from there into its input, until done; else
//     the host's path, a copy down into pageable memory, waited for, a
//     host copy into pinned memory and a copy up from it, waited for;
//   collective = the workers' collectives as the executor runs them: on
//     the host (measure_host_collective over gradient_bytes, a worker per
//     GPU), between each worker's gradient copied down and up on its own
//     GPU, all at once (measure_cuda_packing); and where NCCL opens, the
//     library AllReduce (algorithm=mpi) by NCCL's transport over the GPUs
//     of a gradient each GPU's store keeps (Transport::all_reduce_kept),
//     every member at once at 256 bytes and at gradient_bytes, as a ring's
//     hops (collective.library, fit_library_ring).
// name "cuda<N>gpus-measured". InputError naming --device for fewer than
// two GPUs, one listed twice, one the driver does not have, more workers
// than the host's threads run, or (built without CUDA) always.
Cluster measure_cuda_gpus_cluster(const std::vector<int>& gpus, const CudaProbeOptions& options = {});

}  // namespace trainsim
