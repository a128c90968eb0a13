// make_nccl_rank_member (nccl_transport.hpp): a process's NCCL member over
// the ranks of an MPI launch, one GPU each.
#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/nccl_member.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "exec/process_cores.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

class NcclRankMember final : public LibraryMember {
 public:
  NcclRankMember(int gpu, int rank, int ranks) : gpu_(gpu), rank_(rank), ranks_(ranks) {}

  bool all_reduce(std::span<float> data, const Share& share, const std::function<bool()>& aborted) override {
    return joined(share, aborted) && member_->all_reduce(data, aborted);
  }
  bool sums_kept() const override { return true; }
  bool all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale, const Share& share,
                       const std::function<bool()>& aborted) override {
    return joined(share, aborted) && member_->all_reduce_kept(arrays, floats, scale, aborted);
  }
  bool passes_kept() const override { return true; }
  // A communicator of two ranks per direction not yet opened (its sender
  // rank 0), made by the two in the list's order, then connected by a first
  // message in that order: a rank waits in each ncclCommInitRank, and in
  // each first message, for its one partner only, who has done every
  // earlier one it is in, so every rank gets through.
  bool open_paths(std::span<const std::pair<int, int>> directions, const Share& share,
                  const std::function<bool()>& aborted) override {
    if (aborted()) return false;
    const std::vector<std::pair<int, int>> fresh = opened_.fresh(directions);
    if (fresh.empty()) return true;
    const std::vector<ncclUniqueId> ids = shared_ids(fresh.size(), share);
    TRAINSIM_CUDA(cudaSetDevice(gpu_));
    const OnProcessCores unpinned;  // NCCL's threads on the process's cores, not this thread's one
    for (size_t k = 0; k < fresh.size(); ++k) {
      const auto [from, to] = fresh[k];
      if (rank_ != from && rank_ != to) continue;
      ncclComm_t comm = nullptr;
      check_nccl(ncclCommInitRank(&comm, 2, ids[k], rank_ == from ? 0 : 1), "ncclCommInitRank");
      paths_[fresh[k]] = std::make_unique<NcclMember>(gpu_, comm);
    }
    for (const auto& d : fresh) {
      if (rank_ == d.first && !paths_.at(d)->connect(1, true, aborted)) return false;
      if (rank_ == d.second && !paths_.at(d)->connect(0, false, aborted)) return false;
    }
    return true;
  }
  bool send_kept(int to, KeptValues& values, int64_t floats, const std::function<bool()>& aborted) override {
    return path({rank_, to}).send_kept(1, values, floats, aborted);
  }
  bool recv_kept(int from, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) override {
    return path({from, rank_}).recv_kept(0, into, floats, aborted);
  }

 private:
  // The member, made at the first AllReduce; false where `aborted` was
  // true first.
  bool joined(const Share& share, const std::function<bool()>& aborted) {
    if (!member_) {
      if (aborted()) return false;
      // Rank 0's unique id on every rank, then a communicator of them all.
      // Where rank 0 cannot make one it shares nothing, so the others fail
      // too instead of waiting for it.
      ncclUniqueId id{};
      std::string bytes;
      if (rank_ == 0) {
        const ncclResult_t made = ncclGetUniqueId(&id);
        if (made == ncclSuccess) bytes.assign(id.internal, sizeof(id.internal));
        share(bytes);
        check_nccl(made, "ncclGetUniqueId");
      } else {
        bytes = share(bytes);
      }
      if (bytes.size() != sizeof(id.internal)) {
        throw CudaError("ncclGetUniqueId failed on rank 0: no NCCL communicator between the ranks' GPUs");
      }
      bytes.copy(id.internal, sizeof(id.internal));
      TRAINSIM_CUDA(cudaSetDevice(gpu_));
      ncclComm_t comm = nullptr;
      {
        const OnProcessCores unpinned;  // NCCL's threads on the process's cores, not this thread's one
        check_nccl(ncclCommInitRank(&comm, ranks_, id, rank_), "ncclCommInitRank");
      }
      member_ = std::make_unique<NcclMember>(gpu_, comm);
    }
    return true;
  }

  // Rank 0's `count` unique ids on every rank; where rank 0 cannot make
  // them it shares none, so the others fail too instead of waiting for it.
  std::vector<ncclUniqueId> shared_ids(size_t count, const Share& share) const {
    std::vector<ncclUniqueId> ids(count);
    std::string bytes;
    if (rank_ == 0) {
      ncclResult_t made = ncclSuccess;
      for (ncclUniqueId& id : ids) {
        if (made == ncclSuccess) made = ncclGetUniqueId(&id);
      }
      if (made == ncclSuccess) {
        for (const ncclUniqueId& id : ids) bytes.append(id.internal, sizeof(id.internal));
      }
      share(bytes);
      check_nccl(made, "ncclGetUniqueId");
    } else {
      bytes = share(bytes);
    }
    if (bytes.size() != count * sizeof(ncclUniqueId::internal)) {
      throw CudaError("ncclGetUniqueId failed on rank 0: no NCCL communicator between the ranks' GPUs");
    }
    for (size_t k = 0; k < count; ++k) {
      bytes.copy(ids[k].internal, sizeof(ids[k].internal), k * sizeof(ids[k].internal));
    }
    return ids;
  }

  NcclMember& path(const std::pair<int, int>& direction) {
    auto it = paths_.find(direction);
    TRAINSIM_CHECK(it != paths_.end(), "an array passed from rank " + std::to_string(direction.first) + " to " +
                                           std::to_string(direction.second) + " before that path was opened");
    return *it->second;
  }

  int gpu_ = 0;
  int rank_ = 0;
  int ranks_ = 1;
  std::unique_ptr<NcclMember> member_;
  std::map<std::pair<int, int>, std::unique_ptr<NcclMember>> paths_;  // (sender, receiver): their communicator
  OpenedPaths opened_;
};

}  // namespace

std::unique_ptr<LibraryMember> make_nccl_rank_member(int gpu, int rank, int ranks) {
  check_nccl_gpu(gpu);
  TRAINSIM_CHECK(rank >= 0 && rank < ranks,
                 "make_nccl_rank_member: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  return std::make_unique<NcclRankMember>(gpu, rank, ranks);
}

}  // namespace trainsim
