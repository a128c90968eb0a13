// measure_cuda_packing (cuda_pack_probe.hpp).
#include "profiles/profiler/cuda_pack_probe.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/tensor/tensor.hpp"
#include "model/error.hpp"
#include "profiles/profiler/cuda_owners.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

constexpr int64_t kSmallPackingBytes = 256;  // the packing timed for the fixed part

// One worker's gradient on the GPU, the pinned buffers its copies go
// through and its host values (one tensor, as the executor's Gradients).
class PackingWorker {
 public:
  explicit PackingWorker(size_t floats)
      : stream_(probe::make_stream()),
        gradient_(probe::device_floats(floats)),
        down_(probe::pinned_floats(floats)),
        up_(probe::pinned_floats(floats)) {
    ParamGrad g;
    g.dense = Tensor({static_cast<int64_t>(floats)});
    host_.push_back({std::move(g)});
    TRAINSIM_CUDA(cudaMemsetAsync(gradient_.get(), 0, bytes(), stream_.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_.get()));
  }

  // As the executor: KeptTraining::gradients_to_host, all_reduce's
  // flatten, scale and unflatten (the ring between them left out), the
  // step's DeviceStore::from_host_all.
  void pack(float mean) {
    std::vector<float>& host = host_[0][0].dense.data;
    TRAINSIM_CUDA(cudaMemcpyAsync(down_.get(), gradient_.get(), bytes(), cudaMemcpyDeviceToHost, stream_.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_.get()));
    for (size_t i = 0; i < host.size(); ++i) host[i] += down_.get()[i];
    std::vector<float> flat = flatten_gradients(host_, 0, 0);
    for (float& v : flat) v *= mean;
    unflatten_gradients(flat, host_, 0, 0);
    std::copy(host.begin(), host.end(), up_.get());
    TRAINSIM_CUDA(cudaMemcpyAsync(gradient_.get(), up_.get(), bytes(), cudaMemcpyHostToDevice, stream_.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(stream_.get()));
  }

 private:
  size_t bytes() const { return host_[0][0].dense.data.size() * sizeof(float); }

  probe::Stream stream_;
  probe::DeviceBuffer gradient_;
  probe::HostBuffer down_, up_;
  Gradients host_;
};

}  // namespace

int64_t host_worker_threads() { return max_worker_threads(); }

ChannelFit measure_cuda_packing(int device, int64_t workers, int64_t gradient_bytes, const CudaProbeOptions& o) {
  TRAINSIM_CHECK(workers >= 1, "a packing by one worker or more");
  return measure_cuda_packing(std::vector<int>(static_cast<size_t>(workers), device), gradient_bytes, o);
}

ChannelFit measure_cuda_packing(const std::vector<int>& gpu_of_worker, int64_t gradient_bytes,
                                const CudaProbeOptions& o) {
  const auto workers = static_cast<int64_t>(gpu_of_worker.size());
  TRAINSIM_CHECK(workers >= 1 && gradient_bytes >= 4, "a packing of some bytes by one worker or more");
  const float mean = 1.0f / static_cast<float>(workers);
  const auto timed = [&](int64_t bytes) {
    const auto floats = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
    std::vector<std::unique_ptr<PackingWorker>> packing;
    for (const int gpu : gpu_of_worker) {
      TRAINSIM_CUDA(cudaSetDevice(gpu));
      packing.push_back(std::make_unique<PackingWorker>(floats));
    }
    const double seconds = concurrent_median_s(workers, o.warmups, o.repeats, [&](int64_t t) {
      TRAINSIM_CUDA(cudaSetDevice(gpu_of_worker[static_cast<size_t>(t)]));
      packing[static_cast<size_t>(t)]->pack(mean);
    });
    return ChannelSample{static_cast<double>(floats * sizeof(float)), seconds};
  };
  const ChannelSample whole = timed(gradient_bytes);
  if (whole.bytes <= kSmallPackingBytes) {  // nothing smaller to tell the fixed part by
    ChannelFit fit;
    fit.bandwidth_bytes_per_s = whole.bytes / whole.one_way_s;
    return fit;
  }
  return fit_packing(timed(kSmallPackingBytes), whole);
}

}  // namespace trainsim
