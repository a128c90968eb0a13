// NcclMember (nccl_member.hpp): one GPU's part of NCCL's AllReduce.
#include "exec/cuda/nccl_member.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "exec/library_calls.hpp"
#include "model/error.hpp"

namespace trainsim {

void check_nccl(ncclResult_t result, const char* call) {
  ++library_calls;
  if (result == ncclSuccess) return;
  const std::string unloaded = nccl_library_error();
  throw CudaError(std::string(call) + " failed: " + (unloaded.empty() ? ncclGetErrorString(result) : unloaded));
}

namespace {

std::mutex& issuing(int gpu) {
  static std::mutex guard;
  static std::map<int, std::mutex> locks;  // nodes never move
  const std::lock_guard lock(guard);
  return locks[gpu];
}

}  // namespace

NcclMember::NcclMember(int gpu, ncclComm_t comm) : gpu_(gpu), issue_(issuing(gpu)), comm_(comm) {
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
  // Work still queued (a peer that never came for its message) would hold
  // ncclCommDestroy for ever.
  const bool idle = stream_ == nullptr || cudaStreamQuery(stream_) == cudaSuccess;
  (void)cudaGetLastError();  // not ready is an answer, not an error for a later check to report
  ncclComm_t comm = nullptr;
  {
    const std::lock_guard lock(issue_);
    comm = std::exchange(comm_, nullptr);
  }
  if (comm != nullptr && idle) {
    ncclCommDestroy(comm);
  } else if (comm != nullptr) {
    ncclCommAbort(comm);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (back_ != nullptr) cudaFreeHost(back_);
}

bool NcclMember::gave_up(const std::function<bool()>& aborted) {
  if (!aborted()) return false;
  abandon();
  return true;
}

float* NcclMember::buffer(int64_t floats) {
  if (buffer_.size() < floats) {
    buffer_ = cuda::DeviceArray<float>();  // the old one freed before the larger one is made
    buffer_ = cuda::DeviceArray<float>(floats);
  }
  return buffer_.get();
}

bool NcclMember::finished(const std::function<bool()>& aborted) {
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  for (cudaError_t status = cudaStreamQuery(stream_); status != cudaSuccess; status = cudaStreamQuery(stream_)) {
    if (status != cudaErrorNotReady) TRAINSIM_CUDA(status);
    (void)cudaGetLastError();  // not ready is an answer, not a launch's error for a later check to report
    if (aborted()) {
      abandon();
      return false;
    }
    std::this_thread::yield();
  }
  const std::lock_guard lock(issue_);
  return comm_ != nullptr;  // abandoned by another thread: the work ended unfinished
}

void NcclMember::abandon() {
  ncclComm_t comm = nullptr;
  {
    const std::lock_guard lock(issue_);
    comm = std::exchange(comm_, nullptr);
  }
  // Not under the lock: aborting may wait for the GPU, on which another
  // communicator's kernel may wait for its own abort.
  if (comm != nullptr) ncclCommAbort(comm);
}

bool NcclMember::alive() {
  const std::lock_guard lock(issue_);
  return comm_ != nullptr;
}

bool NcclMember::all_reduce(std::span<float> data, const std::function<bool()>& aborted) {
  if (gave_up(aborted)) return false;
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  // Grown before the lock: freeing the smaller may wait for the whole GPU.
  float* const sum = buffer(static_cast<int64_t>(data.size()));
  cuda::grown_pinned(back_, back_capacity_, data.size());
  std::copy(data.begin(), data.end(), back_);  // up from pinned memory: no wait for the stream
  {
    const std::lock_guard lock(issue_);
    if (comm_ == nullptr) return false;
    TRAINSIM_CUDA(cudaMemcpyAsync(sum, back_, data.size_bytes(), cudaMemcpyHostToDevice, stream_));
    check_nccl(ncclAllReduce(sum, sum, data.size(), ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
    TRAINSIM_CUDA(cudaMemcpyAsync(back_, sum, data.size_bytes(), cudaMemcpyDeviceToHost, stream_));
  }
  if (!finished(aborted)) return false;
  std::copy_n(back_, data.size(), data.begin());
  return true;
}

bool NcclMember::all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale,
                                 const std::function<bool()>& aborted) {
  if (gave_up(aborted)) return false;
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  float* const sum = buffer(floats);  // grown before the lock
  {
    const std::lock_guard lock(issue_);
    if (comm_ == nullptr) return false;
    queue_all_reduce_kept(arrays, floats, scale, sum);
  }
  return finished(aborted);
}

void NcclMember::queue_all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale, float* sum) {
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  std::vector<cuda::KeptArray*> kept;
  int64_t total = 0;
  for (KeptValues* k : arrays) {
    auto* a = dynamic_cast<cuda::KeptArray*>(k);
    TRAINSIM_CHECK(a != nullptr && a->gpu == gpu_, "an AllReduce of arrays kept on another GPU than its member's");
    kept.push_back(a);
    total += a->values.size();
  }
  TRAINSIM_CHECK(total == floats,
                 "an AllReduce of " + std::to_string(total) + " kept values said to be " + std::to_string(floats));
  int64_t at = 0;
  for (cuda::KeptArray* a : kept) {
    TRAINSIM_CUDA(cudaStreamWaitEvent(stream_, a->written, 0));
    if (a->values.size() > 0) {
      TRAINSIM_CUDA(cudaMemcpyAsync(sum + at, a->values.get(), a->values.bytes(), cudaMemcpyDeviceToDevice, stream_));
    }
    // Its next writer after this read, even where the AllReduce fails to queue.
    TRAINSIM_CUDA(cudaEventRecord(a->written, stream_));
    at += a->values.size();
  }
  if (floats > 0) {
    check_nccl(ncclAllReduce(sum, sum, static_cast<size_t>(floats), ncclFloat, ncclSum, comm_, stream_),
               "ncclAllReduce");
    cuda::scale_values(sum, floats, scale, stream_);
    TRAINSIM_CUDA(cudaGetLastError());
  }
  at = 0;
  for (cuda::KeptArray* a : kept) {
    if (a->values.size() > 0) {
      TRAINSIM_CUDA(cudaMemcpyAsync(a->values.get(), sum + at, a->values.bytes(), cudaMemcpyDeviceToDevice, stream_));
    }
    TRAINSIM_CUDA(cudaEventRecord(a->written, stream_));
    at += a->values.size();
  }
}

// ncclSend of `floats` values at `values` to `peer`, or ncclRecv from it.
ncclResult_t NcclMember::queue_p2p(bool sends, float* values, int64_t floats, int peer) {
  const auto count = static_cast<size_t>(floats);
  return sends ? ncclSend(values, count, ncclFloat, peer, comm_, stream_)
               : ncclRecv(values, count, ncclFloat, peer, comm_, stream_);
}

bool NcclMember::pass_kept(bool sends, int peer, KeptValues& values, int64_t floats,
                           const std::function<bool()>& aborted) {
  if (gave_up(aborted)) return false;
  const std::lock_guard lock(issue_);
  if (comm_ == nullptr) return false;
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  auto* a = dynamic_cast<cuda::KeptArray*>(&values);
  TRAINSIM_CHECK(a != nullptr && a->gpu == gpu_, "an array passed from or to another GPU than its member's");
  TRAINSIM_CHECK(a->values.size() == floats,
                 "an array of " + std::to_string(a->values.size()) + " values passed as " + std::to_string(floats));
  TRAINSIM_CUDA(cudaStreamWaitEvent(stream_, a->written, 0));
  const ncclResult_t queued = floats > 0 ? queue_p2p(sends, a->values.get(), floats, peer) : ncclSuccess;
  // Its next work after this, even where NCCL failed to queue it.
  TRAINSIM_CUDA(cudaEventRecord(a->written, stream_));
  check_nccl(queued, sends ? "ncclSend" : "ncclRecv");
  return true;
}

bool NcclMember::connect(int peer, bool sends, const std::function<bool()>& aborted) {
  if (gave_up(aborted)) return false;
  TRAINSIM_CUDA(cudaSetDevice(gpu_));
  float* const value = buffer(1);
  {
    const std::lock_guard lock(issue_);
    if (comm_ == nullptr) return false;
    check_nccl(queue_p2p(sends, value, 1, peer), sends ? "ncclSend" : "ncclRecv");
  }
  return finished(aborted);
}

bool NcclMember::connect_pair(NcclMember& sender, NcclMember& receiver, const std::function<bool()>& aborted,
                              double limit_s) {
  NcclMember* const members[] = {&sender, &receiver};
  return connect_all(
      members,
      [](size_t rank, NcclMember& m, float* value) { return m.queue_p2p(rank == 0, value, 1, rank == 0 ? 1 : 0); },
      aborted, limit_s,
      "first message from GPU " + std::to_string(sender.gpu_) + " to GPU " + std::to_string(receiver.gpu_));
}

bool NcclMember::connect_group(std::span<NcclMember* const> members, const std::function<bool()>& aborted,
                               double limit_s) {
  return connect_all(
      members,
      [](size_t, NcclMember& m, float* value) {
        return ncclAllReduce(value, value, 1, ncclFloat, ncclSum, m.comm_, m.stream_);
      },
      aborted, limit_s, "first AllReduce over " + std::to_string(members.size()) + " GPUs");
}

bool NcclMember::connect_all(std::span<NcclMember* const> members,
                             const std::function<ncclResult_t(size_t, NcclMember&, float*)>& queue,
                             const std::function<bool()>& aborted, double limit_s, const std::string& what) {
  std::vector<float*> values;
  for (NcclMember* m : members) {
    if (m->gave_up(aborted)) return false;
    TRAINSIM_CUDA(cudaSetDevice(m->gpu_));
    values.push_back(m->buffer(1));  // grown before the locks
  }
  {
    // Every GPU's lock, in the GPUs' order (one member per GPU).
    std::vector<NcclMember*> by_gpu(members.begin(), members.end());
    std::sort(by_gpu.begin(), by_gpu.end(), [](const NcclMember* a, const NcclMember* b) { return a->gpu_ < b->gpu_; });
    for (size_t k = 1; k < by_gpu.size(); ++k) {
      TRAINSIM_CHECK(by_gpu[k - 1]->gpu_ != by_gpu[k]->gpu_, "a communicator with two members on one GPU");
    }
    std::vector<std::unique_lock<std::mutex>> locks;
    for (NcclMember* m : by_gpu) locks.emplace_back(m->issue_);
    for (NcclMember* m : members) {
      if (m->comm_ == nullptr) return false;
    }
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t queued = ncclSuccess;
    for (size_t r = 0; r < members.size(); ++r) {
      const ncclResult_t result = queue(r, *members[r], values[r]);
      if (queued == ncclSuccess) queued = result;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    check_nccl(queued, "NCCL's first call");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  bool late = false;
  const auto stop = [&] {
    late = std::chrono::steady_clock::now() > deadline;
    return late || aborted();
  };
  bool done = true;
  for (NcclMember* m : members) done = done && m->finished(stop);
  if (done) return true;
  for (NcclMember* m : members) m->abandon();
  if (late) throw CudaError("NCCL's " + what + " did not complete within " + std::to_string(limit_s) + " s");
  return false;
}

}  // namespace trainsim
