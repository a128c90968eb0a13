// A process's member of another library's AllReduce: what a transport of one
// process per worker (MPI) runs for the plans' library AllReduce
// (CollectiveAlgorithm::kLibrary) in place of its own, such as NCCL over the
// ranks' GPUs (exec/cuda/nccl_transport.hpp). No CUDA or MPI type appears here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trainsim {

class KeptValues;

// The directions (sending rank, receiving rank) a member has opened
// (LibraryMember::open_paths), alike on every rank: a rank counts every
// direction opened, its own or not, so each call finds the same ones new
// on every rank.
class OpenedPaths {
 public:
  // Those of `directions` not opened before, in their order, once each,
  // none from a rank to itself; counted as opened from now on.
  std::vector<std::pair<int, int>> fresh(std::span<const std::pair<int, int>> directions) {
    std::vector<std::pair<int, int>> out;
    for (const auto& d : directions) {
      if (d.first != d.second && opened_.insert(d).second) out.push_back(d);
    }
    return out;
  }

 private:
  std::set<std::pair<int, int>> opened_;
};

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

  // Whether it also passes an array the rank's device keeps to another
  // rank's device (send_kept, recv_kept): NCCL's member, by ncclSend and
  // ncclRecv between the ranks' GPUs.
  virtual bool passes_kept() const { return false; }
  // What it needs to pass arrays in each listed direction (sending rank,
  // receiving rank): NCCL's member makes a communicator of the two for each
  // one not yet made (a direction's alone, so that each carries its
  // sender's messages in order, whatever the other direction does). Called
  // by every rank with the same list, at the same point of its AllReduces.
  // False where `aborted` turned true while it waited for the others.
  virtual bool open_paths(std::span<const std::pair<int, int>> directions, const Share& share,
                          const std::function<bool()>& aborted) {
    (void)directions, (void)share, (void)aborted;
    throw std::logic_error("LibraryMember: paths opened on a member that passes no arrays");
  }
  // `values` (`floats` of them) to rank `to`, queued after their work, their
  // later work after the send. Messages have no tags: the n-th send to a
  // rank meets that rank's n-th recv_kept from this one, so the transport
  // calls them in the sender's order. False where `aborted`.
  virtual bool send_kept(int to, KeptValues& values, int64_t floats, const std::function<bool()>& aborted) {
    (void)to, (void)values, (void)floats, (void)aborted;
    throw std::logic_error("LibraryMember: an array passed by a member that passes none");
  }
  // The next array from rank `from` into `into` (`floats` values), queued
  // after into's work, its later work after the receive.
  virtual bool recv_kept(int from, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) {
    (void)from, (void)into, (void)floats, (void)aborted;
    throw std::logic_error("LibraryMember: an array received by a member that passes none");
  }
};

}  // namespace trainsim
