// The devices this machine can run plans on: CPU cores for CPU workers and,
// when built with CUDA, the GPUs the driver reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

struct LocalDevice {
  std::string id;             // "cpu:0" (all cores as one entry) or "cuda:0"
  std::string name;           // "NVIDIA H100 80GB HBM3", "x86_64, 2 cores"
  std::string kind;           // "cpu" or "gpu"
  int64_t cores = 0;          // CPU: hardware threads; GPU: streaming multiprocessors
  double memory_bytes = 0;    // RAM or device memory
};

// The running kernel's boot id: the same in every process and network
// namespace of one computer (which share its monotonic clock), different on
// another; empty where it cannot be read.
std::string computer_id();

// CPU first, then every CUDA device; never throws.
std::vector<LocalDevice> list_local_devices();

// CUDA devices only; empty when built without CUDA or when no GPU or driver
// is present. `reason` says why it is empty ("no CUDA driver", "built without CUDA").
std::vector<LocalDevice> list_cuda_devices(std::string& reason);

// The CUDA runtime's, the driver's and cuDNN's versions ("CUDA runtime
// 13.0, driver 13.1, cuDNN 9.13.0"); empty where built without CUDA.
std::string cuda_versions_text();
// A CUDA version number as text: 12040 as "12.4" (CUDA builds only).
std::string cuda_version_text(int version);

}  // namespace trainsim
