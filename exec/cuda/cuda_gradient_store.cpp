// The GPU device's gradient store (cuda_gradient_store.hpp). A sum's event
// orders the streams that touch it: the store's stream zeroes it and copies
// it back, each network's stream adds a backward's share after waiting for
// the work before.
#include "exec/cuda/cuda_gradient_store.hpp"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_network_state.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {
namespace {

// The store's stream, its buffers let go, and the pinned memory sums come back through.
struct StoreCore {
  int gpu = 0;
  cudaStream_t stream = nullptr;
  std::mutex mu;  // idle, and the stream's copies with the pinned memory
  std::map<int64_t, std::vector<std::pair<DeviceArray<float>, cudaEvent_t>>> idle;
  float* pinned = nullptr;
  size_t pinned_floats = 0;

  ~StoreCore() {
    cudaSetDevice(gpu);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (auto& [_, buffers] : idle) {
      for (auto& [values, event] : buffers) cudaEventDestroy(event);
    }
    idle.clear();
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

// A sum whose buffer and event go back to the store when the last
// gradient naming it lets go.
struct PooledSum final : KeptSum {
  std::shared_ptr<StoreCore> home;
  ~PooledSum() override {
    std::lock_guard lock(home->mu);
    const int64_t floats = values.size();
    home->idle[floats].emplace_back(std::move(values), written);
  }
};

class CudaGradientStore final : public GradientStore {
 public:
  explicit CudaGradientStore(int gpu) : core_(std::make_shared<StoreCore>()) {
    core_->gpu = gpu;
    TRAINSIM_CUDA(cudaSetDevice(gpu));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&core_->stream, cudaStreamNonBlocking));
  }

  std::shared_ptr<KeptGradient> zeros(int64_t floats) override {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    auto sum = std::make_shared<PooledSum>();
    sum->gpu = core_->gpu;
    sum->home = core_;
    std::lock_guard lock(core_->mu);
    std::vector<std::pair<DeviceArray<float>, cudaEvent_t>>& idle = core_->idle[floats];
    if (idle.empty()) {
      sum->values = DeviceArray<float>(floats);
      TRAINSIM_CUDA(cudaEventCreateWithFlags(&sum->written, cudaEventDisableTiming));
    } else {
      sum->values = std::move(idle.back().first);
      sum->written = idle.back().second;
      idle.pop_back();
      TRAINSIM_CUDA(cudaStreamWaitEvent(core_->stream, sum->written, 0));  // the adds into it before
    }
    if (floats > 0) TRAINSIM_CUDA(cudaMemsetAsync(sum->values.get(), 0, sum->values.bytes(), core_->stream));
    TRAINSIM_CUDA(cudaEventRecord(sum->written, core_->stream));
    return sum;
  }

  void add_to_host(std::span<KeptGradient* const> sums, std::span<const std::span<float>> into) override {
    TRAINSIM_CHECK(sums.size() == into.size(), "a host buffer per kept gradient");
    std::lock_guard lock(core_->mu);
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    size_t floats = 0;
    for (size_t i = 0; i < sums.size(); ++i) {
      const KeptSum& k = of_this_gpu(sums[i]);
      TRAINSIM_CHECK(
          static_cast<size_t>(k.values.size()) == into[i].size(),
          "a kept gradient of " + std::to_string(k.values.size()) + " values for " + std::to_string(into[i].size()));
      floats += into[i].size();
    }
    if (floats > core_->pinned_floats) {
      if (core_->pinned != nullptr) TRAINSIM_CUDA(cudaFreeHost(core_->pinned));
      core_->pinned = nullptr;
      core_->pinned_floats = 0;
      TRAINSIM_CUDA(cudaMallocHost(reinterpret_cast<void**>(&core_->pinned), floats * sizeof(float)));
      core_->pinned_floats = floats;
    }
    size_t at = 0;
    for (KeptGradient* s : sums) {
      const KeptSum& k = of_this_gpu(s);
      TRAINSIM_CUDA(cudaStreamWaitEvent(core_->stream, k.written, 0));
      if (k.values.size() > 0) {
        TRAINSIM_CUDA(cudaMemcpyAsync(core_->pinned + at, k.values.get(), k.values.bytes(), cudaMemcpyDeviceToHost,
                                      core_->stream));
      }
      at += static_cast<size_t>(k.values.size());
    }
    TRAINSIM_CUDA(cudaStreamSynchronize(core_->stream));
    at = 0;
    for (const std::span<float>& host : into) {
      for (float& v : host) v += core_->pinned[at++];
    }
  }

 private:
  const KeptSum& of_this_gpu(KeptGradient* sum) const {
    const auto* k = dynamic_cast<const KeptSum*>(sum);
    TRAINSIM_CHECK(k != nullptr && k->gpu == core_->gpu, "a gradient kept by another store");
    return *k;
  }

  std::shared_ptr<StoreCore> core_;
};

}  // namespace
}  // namespace cuda

std::shared_ptr<GradientStore> make_cuda_gradient_store(int gpu) {
  return std::make_shared<cuda::CudaGradientStore>(gpu);
}

}  // namespace trainsim
