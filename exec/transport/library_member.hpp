// A process's member of another library's AllReduce: what a transport of one
// process per worker (MPI) runs for the plans' library AllReduce
// (CollectiveAlgorithm::kLibrary) in place of its own, such as NCCL over the
// ranks' GPUs (exec/cuda/nccl_transport.hpp). No CUDA or MPI type appears here.
#pragma once

#include <functional>
#include <span>
#include <string>

namespace trainsim {

class LibraryMember {
 public:
  // Rank 0's bytes on every rank: a collective of the transport's ranks,
  // called by every member at the same point of its AllReduces.
  using Share = std::function<std::string(const std::string& bytes)>;

  virtual ~LibraryMember() = default;

  // The sum of every rank's `data`, in place, every rank ending with the
  // same bits; true once done. Called by every rank in the same order, one
  // at a time. False where `aborted` turned true while it waited for the
  // others: it gave up, and the member takes no more calls.
  virtual bool all_reduce(std::span<float> data, const Share& share, const std::function<bool()>& aborted) = 0;
};

}  // namespace trainsim
