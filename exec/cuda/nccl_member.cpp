// NcclMember (nccl_member.hpp): one GPU's part of NCCL's AllReduce.
#include "exec/cuda/nccl_member.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "model/error.hpp"

namespace trainsim {

void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  const std::string unloaded = nccl_library_error();
  throw CudaError(std::string(call) + " failed: " + (unloaded.empty() ? ncclGetErrorString(result) : unloaded));
}

NcclMember::NcclMember(int gpu, ncclComm_t comm) : gpu_(gpu), comm_(comm) {
  try {
    TRAINSIM_CUDA(cudaSetDevice(gpu_));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  } catch (...) {
    ncclCommDestroy(comm_);
    throw;
  }
}

NcclMember::~NcclMember() {
  cudaSetDevice(gpu_);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (back_ != nullptr) cudaFreeHost(back_);
}

bool NcclMember::all_reduce(std::span<float> data, const std::function<bool()>& aborted) {
  if (comm_ == nullptr || aborted()) {  // given up before, or now before starting
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    return false;
  }
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  if (static_cast<size_t>(buffer_.size()) < data.size()) {
    buffer_ = cuda::DeviceArray<float>();  // the old one freed before the larger one is made
    buffer_ = cuda::DeviceArray<float>(static_cast<int64_t>(data.size()));
  }
  cuda::grown_pinned(back_, back_capacity_, data.size());
  float* const buffer = buffer_.get();
  TRAINSIM_CUDA(cudaMemcpyAsync(buffer, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream_));
  check_nccl(ncclAllReduce(buffer, buffer, data.size(), ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
  TRAINSIM_CUDA(cudaMemcpyAsync(back_, buffer, data.size_bytes(), cudaMemcpyDeviceToHost, stream_));
  for (cudaError_t status = cudaStreamQuery(stream_); status != cudaSuccess; status = cudaStreamQuery(stream_)) {
    if (status != cudaErrorNotReady) TRAINSIM_CUDA(status);
    (void)cudaGetLastError();  // not ready is an answer, not a launch's error for a later check to report
    if (aborted()) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      return false;
    }
    std::this_thread::yield();
  }
  std::copy_n(back_, data.size(), data.begin());
  return true;
}

}  // namespace trainsim
