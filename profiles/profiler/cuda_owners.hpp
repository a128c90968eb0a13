// Inside profiles/profiler (CUDA builds only): owners of the CUDA resources
// the GPU probes make, and their makers. A release that fails (the context
// broken by the error being thrown) is ignored.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "exec/cuda/cuda_check.hpp"

namespace trainsim::probe {

// Puts back the calling thread's current device on the way out.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    TRAINSIM_CUDA(cudaGetDevice(&previous_));
    TRAINSIM_CUDA(cudaSetDevice(device));
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

template <auto release>
struct Release {
  template <typename T>
  void operator()(T* p) const {
    release(p);
  }
};
using DeviceBuffer = std::unique_ptr<float, Release<cudaFree>>;
using HostBuffer = std::unique_ptr<float, Release<cudaFreeHost>>;
using Stream = std::unique_ptr<CUstream_st, Release<cudaStreamDestroy>>;
using Event = std::unique_ptr<CUevent_st, Release<cudaEventDestroy>>;

inline DeviceBuffer device_floats(size_t floats) {
  void* p = nullptr;
  TRAINSIM_CUDA(cudaMalloc(&p, floats * sizeof(float)));
  return DeviceBuffer(static_cast<float*>(p));
}

// Page-locked host memory (cudaMallocHost).
inline HostBuffer pinned_floats(size_t floats) {
  void* p = nullptr;
  TRAINSIM_CUDA(cudaMallocHost(&p, floats * sizeof(float)));
  return HostBuffer(static_cast<float*>(p));
}

inline Stream make_stream() {
  cudaStream_t s = nullptr;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

inline Event make_event() {
  cudaEvent_t e = nullptr;
  TRAINSIM_CUDA(cudaEventCreate(&e));
  return Event(e);
}

}  // namespace trainsim::probe
