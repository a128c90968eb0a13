// One GPU's member of an NCCL communicator, as the NCCL transports run the
// library AllReduce: the member's values copied to a buffer on its GPU,
// summed there by ncclAllReduce on a stream of its own, and copied back
// through pinned memory. Shared by the in-process transport (a member per
// worker thread) and the MPI ranks' member (nccl_transport.cpp,
// nccl_rank_member.cpp).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <span>

#include "exec/cuda/cuda_layer.hpp"

namespace trainsim {

// CudaError naming `call` and NCCL's reason (or why NCCL could not be
// opened) unless `result` is ncclSuccess.
void check_nccl(ncclResult_t result, const char* call);

class NcclMember {
 public:
  // Takes `comm`, a communicator on `gpu`, and makes the member's stream there.
  NcclMember(int gpu, ncclComm_t comm);
  ~NcclMember();
  NcclMember(const NcclMember&) = delete;
  NcclMember& operator=(const NcclMember&) = delete;

  // The sum over the communicator of every member's `data`, in place; true
  // once done. Waits for the copy back polling `aborted`: where it turns
  // true the communicator is aborted (the members still in it would wait
  // for ever), false is returned, and every later call returns false.
  bool all_reduce(std::span<float> data, const std::function<bool()>& aborted);

 private:
  int gpu_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cuda::DeviceArray<float> buffer_;
  // Pinned memory the sum comes back into: a copy into pageable memory would
  // block the host behind the AllReduce, so a member whose peer failed could
  // never abort it.
  float* back_ = nullptr;
  size_t back_capacity_ = 0;  // floats
};

}  // namespace trainsim
