// NcclTransport (nccl_transport.hpp): the in-process transport's messages,
// and the library AllReduce by NCCL on the members' GPUs.
#include "exec/cuda/nccl_transport.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "exec/cuda/cuda_check.hpp"
#include "exec/transport/collectives.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  const std::string unloaded = nccl_library_error();
  throw CudaError(std::string(call) + " failed: " + (unloaded.empty() ? ncclGetErrorString(result) : unloaded));
}

// One member's communicator, stream and device buffer in a group.
struct Member {
  int gpu = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
  size_t capacity = 0;  // floats
  // Pinned memory the sum comes back into: a copy into pageable memory would
  // block the host behind the AllReduce, so a member whose peer failed could
  // never abort it.
  float* back = nullptr;
  size_t back_capacity = 0;  // floats
};

class NcclTransport final : public InProcessTransport {
 public:
  NcclTransport(std::vector<int> gpus, double recv_timeout_s)
      : InProcessTransport(static_cast<int>(gpus.size()), recv_timeout_s), gpus_(std::move(gpus)) {}

  ~NcclTransport() override {
    for (auto& [group, members] : groups_) {
      for (Member& m : members) {
        cudaSetDevice(m.gpu);
        if (m.comm != nullptr) ncclCommDestroy(m.comm);
        if (m.stream != nullptr) cudaStreamDestroy(m.stream);
        if (m.buffer != nullptr) cudaFree(m.buffer);
        if (m.back != nullptr) cudaFreeHost(m.back);
      }
    }
  }

  bool has_library_all_reduce() const override { return true; }

 protected:
  void run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) override {
    if (algorithm != CollectiveAlgorithm::kLibrary) return Transport::run_all_reduce(peers, data, algorithm);
    Member& m = member(peers);
    TRAINSIM_CUDA(cudaSetDevice(m.gpu));
    if (m.capacity < data.size()) {
      if (m.buffer != nullptr) TRAINSIM_CUDA(cudaFree(m.buffer));
      m.buffer = nullptr;
      TRAINSIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&m.buffer), data.size_bytes()));
      m.capacity = data.size();
    }
    if (m.back_capacity < data.size()) {
      if (m.back != nullptr) TRAINSIM_CUDA(cudaFreeHost(m.back));
      m.back = nullptr;
      m.back_capacity = 0;
      TRAINSIM_CUDA(cudaMallocHost(reinterpret_cast<void**>(&m.back), data.size_bytes()));
      m.back_capacity = data.size();
    }
    TRAINSIM_CUDA(cudaMemcpyAsync(m.buffer, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, m.stream));
    check_nccl(ncclAllReduce(m.buffer, m.buffer, data.size(), ncclFloat, ncclSum, m.comm, m.stream), "ncclAllReduce");
    TRAINSIM_CUDA(cudaMemcpyAsync(m.back, m.buffer, data.size_bytes(), cudaMemcpyDeviceToHost, m.stream));
    // Until the copy back is done, or another worker failed: then the
    // communicator is aborted, as the members still in it would wait for ever.
    for (cudaError_t status = cudaStreamQuery(m.stream); status != cudaSuccess; status = cudaStreamQuery(m.stream)) {
      if (status != cudaErrorNotReady) TRAINSIM_CUDA(status);
      (void)cudaGetLastError();  // not ready is an answer, not a launch's error for a later check to report
      if (aborted()) {
        ncclCommAbort(m.comm);
        m.comm = nullptr;
        throw_aborted();
      }
      std::this_thread::yield();
    }
    std::copy_n(m.back, data.size(), data.begin());
  }

 private:
  // The caller's member of its group, the group's communicators made by
  // the first member to get here.
  Member& member(const CollectivePeers& peers) {
    std::lock_guard lock(mu_);
    auto it = groups_.find(peers.group());
    if (it == groups_.end()) {
      std::vector<Member> members(peers.group().size());
      std::vector<ncclComm_t> comms(members.size());
      std::vector<int> devices;
      for (size_t r = 0; r < members.size(); ++r) {
        members[r].gpu = gpus_[static_cast<size_t>(peers.group()[r])];
        devices.push_back(members[r].gpu);
      }
      check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()), "ncclCommInitAll");
      for (size_t r = 0; r < members.size(); ++r) {
        members[r].comm = comms[r];
        TRAINSIM_CUDA(cudaSetDevice(members[r].gpu));
        TRAINSIM_CUDA(cudaStreamCreateWithFlags(&members[r].stream, cudaStreamNonBlocking));
      }
      it = groups_.emplace(peers.group(), std::move(members)).first;
    }
    return it->second[static_cast<size_t>(peers.rank())];
  }

  std::vector<int> gpus_;
  std::mutex mu_;
  std::map<std::vector<int>, std::vector<Member>> groups_;  // worker ids -> one member each, in group order
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(const std::vector<int>& gpu_of_worker, double recv_timeout_s) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  std::set<int> seen;
  for (const int gpu : gpu_of_worker) {
    if (gpu < 0 || gpu >= count) {
      throw InputError("--devices",
                       "names GPU " + std::to_string(gpu) + ", but this machine has " + std::to_string(count) +
                           " the driver answers for",
                       "GPUs 0 to " + std::to_string(std::max(0, count - 1)));
    }
    if (!seen.insert(gpu).second) {
      throw InputError("--devices", "puts two workers on GPU " + std::to_string(gpu),
                       "a GPU of its own for every worker: NCCL refuses two ranks on one GPU (NVIDIA/nccl#418)");
    }
  }
  return std::make_unique<NcclTransport>(gpu_of_worker, recv_timeout_s);
}

}  // namespace trainsim
