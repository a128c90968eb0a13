// A process's member of another library's AllReduce: what a transport of one
// process per worker (MPI) runs for the plans' library AllReduce
// (CollectiveAlgorithm::kLibrary) in place of its own, such as NCCL over the
// ranks' GPUs (exec/cuda/nccl_transport.hpp). No CUDA or MPI type appears here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

namespace trainsim {

class KeptValues;

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
  // Whether it also sums arrays the rank's device keeps where they are
  // (all_reduce_kept): NCCL's member, on its GPU's.
  virtual bool sums_kept() const { return false; }
  // As all_reduce, of `arrays` (`floats` values in all) of the device's
  // store, each summed in place, then times `scale`. Only where sums_kept().
  virtual bool all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale, const Share& share,
                               const std::function<bool()>& aborted) {
    (void)arrays, (void)floats, (void)scale, (void)share, (void)aborted;
    throw std::logic_error("LibraryMember: an AllReduce of kept arrays by a member that sums none");
  }
};

}  // namespace trainsim
