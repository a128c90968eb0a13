// The command line's value parsers for --straggler, --devices, --device and --precision,
// in trainsim_cli_options (tools/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "exec/transport/transport.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {

// Simulator options from `--straggler PROB:SLOWDOWN`, `--jitter SD`, `--seed S`.
SimOptions parse_sim_options(const std::string& straggler, double jitter, uint64_t seed);

// `--devices cpu:N` -> N worker threads (InputError naming --devices otherwise).
int64_t parse_cpu_devices(const std::string& text);

// A GPU and how many workers share it: `cuda` (GPU 0, one worker), `cuda:N`,
// `cuda:NxW` (W virtual workers on GPU N); InputError naming `flag` otherwise.
struct GpuDevice {
  int index = 0;
  int64_t workers = 1;
  // cuda:G0,G1,...: one worker on each GPU listed (index the first), their
  // AllReduce by NCCL; empty for cuda:G and cuda:GxW.
  std::vector<int> each;
};
GpuDevice parse_gpu_device(const std::string& device, const std::string& flag);

// The device memory worker `worker` of `gpu` may hold: with S > 1 workers
// sharing its GPU, an S-th of that GPU's memory, as on S GPUs of that
// size; alone on it, no limit, its memory only counted (Device::memory_use).
// S is `sharing`, or where 0 what `gpu` says: W for cuda:GxW, 1 for
// cuda:G,H,... (under mpirun the caller counts the ranks of its host on the
// same GPU: GPU numbers are per host).
std::shared_ptr<MemoryBudget> gpu_worker_budget(const GpuDevice& gpu, int32_t worker, int64_t sharing = 0);

// Whether the ranks of an MPI launch have a GPU each: no two ranks of one
// host (host_of_rank, mpi_host_of_ranks) on the same GPU (gpu_of_rank). Then
// their library AllReduce can go by NCCL, which refuses two ranks on one GPU.
bool one_rank_per_gpu(const std::vector<int>& gpu_of_rank, const std::vector<int>& host_of_rank);

// The transports of a run of workers with a GPU each in one process
// (`--devices cuda:G,H,...`, worker w on gpus[w]): NCCL's, its communicators
// made once for every transport (a run's stretches between checkpoints, a
// validation's runs). Null where NCCL cannot be opened (the in-process
// transport's then: algorithm=mpi refused, the other algorithms on the
// host). make_nccl_transport's InputErrors (naming --devices) come now.
std::function<std::unique_ptr<Transport>(int endpoints)> gpu_each_transports(const std::vector<int>& gpus);

// `--devices` of trainsim run: cpu:N worker threads, or workers on a GPU
// (parse_gpu_device).
struct WorkerDevices {
  int64_t workers = 1;
  std::optional<GpuDevice> gpu;
};
WorkerDevices parse_worker_devices(const std::string& text);

// `--precision`: fp32 (CudaPrecision::fast) or tf32 (a GPU's products on
// TF32 tensor cores, `gpu` true only); InputError naming --precision otherwise.
CudaPrecision parse_gpu_precision(const std::string& text, bool gpu);

}  // namespace trainsim
