// make_nccl_rank_member (nccl_transport.hpp): a process's NCCL member over
// the ranks of an MPI launch, one GPU each.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/nccl_member.hpp"
#include "exec/cuda/nccl_transport.hpp"
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
      check_nccl(ncclCommInitRank(&comm, ranks_, id, rank_), "ncclCommInitRank");
      member_ = std::make_unique<NcclMember>(gpu_, comm);
    }
    return true;
  }

  int gpu_ = 0;
  int rank_ = 0;
  int ranks_ = 1;
  std::unique_ptr<NcclMember> member_;
};

}  // namespace

std::unique_ptr<LibraryMember> make_nccl_rank_member(int gpu, int rank, int ranks) {
  check_nccl_gpu(gpu);
  TRAINSIM_CHECK(rank >= 0 && rank < ranks,
                 "make_nccl_rank_member: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  return std::make_unique<NcclRankMember>(gpu, rank, ranks);
}

}  // namespace trainsim
