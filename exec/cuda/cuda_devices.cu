// CUDA device enumeration through the runtime API. A machine without a GPU or
// driver yields no devices and a reason, never an error.
#include <cuda_runtime.h>

#include "exec/devices.hpp"

namespace trainsim {

std::vector<LocalDevice> list_cuda_devices(std::string& reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    reason = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    return {};
  }
  if (count == 0) {
    reason = "the CUDA runtime reports no device";
    return {};
  }
  std::vector<LocalDevice> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back({"cuda:" + std::to_string(i), prop.name, "gpu", prop.multiProcessorCount,
                       static_cast<double>(prop.totalGlobalMem)});
  }
  if (devices.empty()) reason = "no CUDA device answered a properties query";
  return devices;
}

}  // namespace trainsim
