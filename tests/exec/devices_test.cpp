// Local device enumeration: a CPU always, GPUs only where CUDA finds them.
#include "exec/devices.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trainsim
