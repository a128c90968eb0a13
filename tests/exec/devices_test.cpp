// Local device enumeration: a CPU always, GPUs only where CUDA finds them.
#include "exec/devices.hpp"

#include <gtest/gtest.h>

#ifdef TRAINSIM_WITH_CUDA
#include <cuda_runtime.h>
#include <cudnn.h>
#endif

namespace trainsim {
namespace {

TEST(Devices, CpuIsAlwaysListedFirst) {
  const auto devices = list_local_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front().id, "cpu:0");
  EXPECT_EQ(devices.front().kind, "cpu");
  EXPECT_GE(devices.front().cores, 1);
  EXPECT_GT(devices.front().memory_bytes, 0);
}

TEST(Devices, CudaDevicesHaveMemoryOrAReason) {
  std::string reason;
  const auto gpus = list_cuda_devices(reason);
  if (gpus.empty()) {
    EXPECT_FALSE(reason.empty());
    GTEST_SKIP() << "GPU test skipped: " << reason;
  }
  for (const auto& gpu : gpus) {
    EXPECT_EQ(gpu.kind, "gpu");
    EXPECT_GT(gpu.memory_bytes, 0);
    EXPECT_GT(gpu.cores, 0);
  }
}

// The CUDA libraries' versions, for a report to name (the runtime's and
// cuDNN's are the build's, GPU or none); none without CUDA.
TEST(Devices, NameTheCudaLibrariesVersions) {
  const std::string versions = cuda_versions_text();
#ifdef TRAINSIM_WITH_CUDA
  EXPECT_EQ(versions.rfind("CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + ".", 0), 0u) << versions;
  EXPECT_NE(versions.find(", cuDNN " + std::to_string(CUDNN_MAJOR) + "."), std::string::npos) << versions;
#else
  EXPECT_EQ(versions, "");
#endif
}

}  // namespace
}  // namespace trainsim
