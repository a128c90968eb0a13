// One GPU's member of an NCCL communicator, as the NCCL transports run the
// library AllReduce: the member's values (the host's, or arrays its GPU's
// store keeps) copied to a buffer on its GPU, summed there by one
// ncclAllReduce on a stream of its own, and copied back (to the host
// through pinned memory, or into the arrays). Shared by the in-process transport (a member per
// worker thread) and the MPI ranks' member (nccl_transport.cpp,
// nccl_rank_member.cpp).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>

#include "exec/cuda/cuda_layer.hpp"
#include "exec/tensor/range_network.hpp"

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
  // The same of arrays a store of the member's GPU keeps (`floats` values
  // in all: Transport::all_reduce_kept), without the host: each copied
  // into the buffer after its work, one ncclAllReduce, the sum times
  // `scale`, each copied back, its later work after that. Waits for it as
  // all_reduce does.
  bool all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale,
                       const std::function<bool()>& aborted);
  // `values` (`floats` of an array a store of the member's GPU keeps) to
  // rank `peer` of the communicator by ncclSend, after the array's work, its
  // later work after the send; into `into` from `peer` by ncclRecv
  // likewise. Queued on the member's stream, not waited for; false where
  // the member gave up (all_reduce).
  bool send_kept(int peer, KeptValues& values, int64_t floats, const std::function<bool()>& aborted) {
    return pass_kept(true, peer, values, floats, aborted);
  }
  bool recv_kept(int peer, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) {
    return pass_kept(false, peer, into, floats, aborted);
  }
  // One value sent to `peer` (`sends`) or received from it, waited for as
  // all_reduce waits: NCCL connects a pair's path at its first message, the
  // host waiting for the peer's part, so a communicator's first message is
  // one the two exchange when both are there for it.
  bool connect(int peer, bool sends, const std::function<bool()>& aborted);
  // The same for a communicator of two members of this process, `sender`
  // its rank 0 and `receiver` its rank 1: one value from the first to the
  // second, both queued by this thread in one NCCL group, then waited for.
  // Waits at most `limit_s` seconds; a CudaError past it, both
  // communicators aborted.
  static bool connect_pair(NcclMember& sender, NcclMember& receiver, const std::function<bool()>& aborted,
                           double limit_s);
  // The same for a communicator of `members` (its ranks in order, a GPU
  // each, all of this process): one AllReduce of one value, which connects
  // its ring, so that no later AllReduce holds the host (and the GPU's
  // lock) until every member reaches it. The limit starts once NCCL has
  // taken the group: a connection NCCL makes inside ncclGroupEnd and never
  // finishes holds the caller there, under every member's GPU lock.
  static bool connect_group(std::span<NcclMember* const> members, const std::function<bool()>& aborted, double limit_s);
  // The communicator aborted (its queued work ended, as a failed run's
  // messages that will never be matched must be, before the GPU's memory
  // is freed: cudaFree waits for the whole device); every later call
  // returns false. Safe from any thread.
  void abandon();
  // Whether it has not given up.
  bool alive();

 private:
  // The buffer of at least `floats` values on the member's GPU (current).
  float* buffer(int64_t floats);
  // Waits for the stream's work polling `aborted`; false where it turned
  // true (the communicator aborted).
  bool finished(const std::function<bool()>& aborted);
  bool pass_kept(bool sends, int peer, KeptValues& values, int64_t floats, const std::function<bool()>& aborted);
  // all_reduce_kept's work queued on the member's stream, summed in `sum`
  // (the member's buffer); callers hold issue_.
  void queue_all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale, float* sum);
  ncclResult_t queue_p2p(bool sends, float* values, int64_t floats, int peer);
  // `queue(rank, member, value)` for every member in one NCCL group, this
  // thread holding every member's GPU lock, then each waited for (at most
  // `limit_s`: a CudaError naming `what` past it, every communicator
  // aborted).
  static bool connect_all(std::span<NcclMember* const> members,
                          const std::function<ncclResult_t(size_t, NcclMember&, float*)>& queue,
                          const std::function<bool()>& aborted, double limit_s, const std::string& what);
  // Where `aborted` is true now: the communicator aborted, true. Callers
  // then check comm_ under issue_ (another thread may have abandoned it).
  bool gave_up(const std::function<bool()>& aborted);

  int gpu_ = 0;
  // Held while NCCL's calls are issued to any communicator of this GPU in
  // the process, and while comm_ is read or changed: NCCL does not allow
  // threads to issue operations in parallel to communicators on one device
  // (a GPU here has the AllReduce's and a path's per direction). Never held
  // while a member waits for its stream, frees memory or aborts.
  std::mutex& issue_;
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
