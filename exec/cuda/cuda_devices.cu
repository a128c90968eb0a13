// CUDA device enumeration through the runtime API. A machine without a GPU or
// driver yields no devices and a reason, never an error.
#include <cuda_runtime.h>
#include <cudnn.h>

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

// CUDA's versions are 1000 major + 10 minor.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string cuda_versions_text() {
  int runtime = 0, driver = 0;
  std::string text = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? "CUDA runtime " + cuda_version_text(runtime) : "";
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    text += (text.empty() ? "" : ", ") + std::string("driver ") + cuda_version_text(driver);
  }
  // cuDNN 9's: 10000 major + 100 minor + patch.
  const size_t dnn = cudnnGetVersion();
  return text + (text.empty() ? "" : ", ") + "cuDNN " + std::to_string(dnn / 10000) + "." +
         std::to_string(dnn % 10000 / 100) + "." + std::to_string(dnn % 100);
}

}  // namespace trainsim
