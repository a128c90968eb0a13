// What the GPU device refuses before it touches a GPU (every build runs
// these): ops without a CUDA kernel and, on a machine without a GPU or in a
// build without CUDA, any device.
#include <gtest/gtest.h>

#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/cuda_network.hpp"
#include "exec/devices.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

#ifdef TRAINSIM_WITH_CUDA
#define SKIP_WITHOUT_CUDA() \
  do {                      \
  } while (false)
#else
#define SKIP_WITHOUT_CUDA() GTEST_SKIP() << "built without CUDA: every device is refused first"
#endif

std::string error_of(const Model& model, int device) {
  try {
    const Network net = build_network(model);
    CudaNetwork gpu(model, init_weights(net, 1), 4, device);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A windowed average pooling has no GPU kernel (a global one has).
Model windowed_average() {
  ModelBuilder b("windowed", "test", {2, 6, 6}, 4);
  b.linear("fc", b.flatten("flat", b.avgpool("pool", kModelInput, pool(2, 2))), 3);
  return std::move(b).build();
}

TEST(CudaNetworkErrors, AnOpWithoutAKernelIsNamedWithItsLayer) {
  SKIP_WITHOUT_CUDA();
  const std::string error = error_of(windowed_average(), 0);
  EXPECT_NE(error.find("windowed: pool.op"), std::string::npos) << error;
  EXPECT_NE(error.find("op 'avgpool' has no CUDA kernel"), std::string::npos) << error;
}

// An embedding bag has one: text-bag fails on the GPU alone (none here, or
// one past the last), never on its ops.
TEST(CudaNetworkErrors, AnEmbeddingBagHasAKernel) {
  SKIP_WITHOUT_CUDA();
  std::string reason;
  const int past_last = static_cast<int>(list_cuda_devices(reason).size());
  const std::string error = error_of(build_zoo_model("text-bag"), past_last);
  EXPECT_EQ(error.find("no CUDA kernel"), std::string::npos) << error;
  EXPECT_EQ(error.rfind("--device", 0), 0u) << error;
}

TEST(CudaNetworkErrors, AConcatenationIsRefusedNamingItsLayer) {
  SKIP_WITHOUT_CUDA();
  ModelBuilder b("branchy", "test", {16}, 4);
  const std::string fc1 = b.linear("fc1", kModelInput, 16);
  b.linear("out", b.concat("joined", {b.linear("fc2", fc1, 16), fc1}), 4);
  const std::string error = error_of(std::move(b).build(), 0);
  EXPECT_NE(error.find("branchy: joined.op"), std::string::npos) << error;
}

TEST(CudaNetworkErrors, NoGpuOrABadIndexNamesTheDevice) {
  std::string reason;
  const auto gpus = list_cuda_devices(reason);
  const int index = gpus.empty() ? 0 : static_cast<int>(gpus.size());  // one past the last
  const std::string error = error_of(build_zoo_model("fmnist-mlp"), index);
  EXPECT_NE(error.find("--device"), std::string::npos) << error;
}

// The interpreter's GPU device checks the model and the GPU when it is made,
// naming --devices (trainsim run's flag) for the GPU.
std::string device_error_of(const Model& model, int gpu) {
  try {
    make_cuda_device(model, gpu, CudaPrecision::exact);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaNetworkErrors, TheInterpretersDeviceNamesAnOpWithoutAKernel) {
  SKIP_WITHOUT_CUDA();
  const std::string error = device_error_of(windowed_average(), 0);
  EXPECT_NE(error.find("op 'avgpool'"), std::string::npos) << error;
}

TEST(CudaNetworkErrors, TheInterpretersDeviceNamesDevicesWithoutThatGpu) {
  std::string reason;
  const auto gpus = list_cuda_devices(reason);
  const std::string error = device_error_of(build_zoo_model("fmnist-mlp"), static_cast<int>(gpus.size()));
  EXPECT_EQ(error.rfind("--devices", 0), 0u) << error;
}

}  // namespace
}  // namespace trainsim
