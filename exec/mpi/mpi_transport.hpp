// The MPI transport: workers are the ranks of a communicator, one process
// each, and a message is an MPI message between them. A process calls it as
// its own rank only (sends from it, receives to it, collectives as it); its
// threads may call it at once (MPI_THREAD_MULTIPLE). The collectives are the
// project's own algorithms over these messages (Transport's defaults), so
// the pattern on the wire is the one sim/ times.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "exec/transport/library_member.hpp"
#include "exec/transport/transport.hpp"

namespace trainsim {

// MPI for this process: initialized with MPI_THREAD_MULTIPLE on
// construction (unless the process already did) and finalized on
// destruction (if it initialized it), except when an exception unwinds it:
// the other ranks may be waiting for this one in a collective, and
// MPI_Finalize would wait for them. The process then exits unfinalized, its
// error reported, and the launcher ends the job on its exit status.
// InputError where the MPI library cannot give threads that level.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owns_ = false;
  int unwinding_ = 0;  // std::uncaught_exceptions() when made
  int rank_ = 0;
  int size_ = 1;
};

// The host each rank of `comm` runs on, numbered 0, 1, ... in the order of
// each host's lowest rank: ranks that can share memory
// (MPI_COMM_TYPE_SHARED, one node to the MPI runtime) share a host. Every
// rank calls it (collective over `comm`).
std::vector<int> mpi_host_of_ranks(MPI_Comm comm = MPI_COMM_WORLD);

// Rank 0's `text` on every rank of `comm` (collective). The others wait
// asleep between polls, so a rank waiting here leaves its core to the ranks
// still measuring or training.
std::string mpi_broadcast_text(const std::string& text, MPI_Comm comm = MPI_COMM_WORLD);

// Ends every rank of the job with `status` (MPI_Abort): where one rank
// cannot go on and the others would wait for its messages.
[[noreturn]] void mpi_abort_job(int status);

// Every rank's `value` on every rank of `comm`, in rank order (collective).
std::vector<double> mpi_all_gather(double value, MPI_Comm comm = MPI_COMM_WORLD);

// The largest message Open MPI's ob1 sends eagerly between every pair of
// ranks, from its MCA settings (the launcher passes them as OMPI_MCA_*
// variables): the TCP eager limit where `btl` names only tcp and self and
// `pml` is unset or ob1; else 0 (shared memory's eager limit is a few KB).
int64_t tcp_eager_bytes_of(const char* btl, const char* pml, const char* eager_limit);
// Open MPI's TCP socket send buffer where `sndbuf` (btl_tcp_sndbuf) sets it
// and the sends go eagerly over TCP (eager_bytes > 0): a send that waits to
// leave (SendReturns::kLeft) returns with at most that much still in the
// kernel. 0 otherwise (Linux then sizes the buffer itself).
int64_t tcp_send_buffer_bytes_of(int64_t eager_bytes, const char* sndbuf);

class MpiTransport final : public Transport {
 public:
  // The ranks of `comm` (duplicated, so the transport's tags never meet the
  // caller's messages) are the workers. MPI must be initialized with
  // MPI_THREAD_MULTIPLE.
  explicit MpiTransport(MPI_Comm comm = MPI_COMM_WORLD);
  // The transport of a plan with `endpoints` workers and servers: ranks
  // 0..endpoints-1 of `comm` join it; a rank beyond them gets none (it sits
  // the run out). Every rank of `comm` calls it (collective). InputError
  // when `comm` has fewer ranks than the plan endpoints.
  static std::unique_ptr<MpiTransport> for_endpoints(int endpoints, MPI_Comm comm = MPI_COMM_WORLD);
  // Waits for the sends still in flight, then frees the communicator.
  ~MpiTransport() override;

  int rank() const { return rank_; }
  // CollectiveAlgorithm::kLibrary: MPI_Allreduce over every rank, or
  // `member`'s AllReduce once given (NCCL over the ranks' GPUs). Every rank
  // gives one or none, before its first AllReduce; a member may outlive the
  // transport and serve the next one of the same ranks (a run's stretches
  // between checkpoints), its communicator made once.
  bool has_library_all_reduce() const override { return true; }
  void sum_library_by(std::shared_ptr<LibraryMember> member) { library_member_ = std::move(member); }
  // Where the member sums kept arrays (LibraryMember::sums_kept), over
  // every rank.
  bool sums_kept(const std::vector<int>& group) const override;
  // Where the member passes kept arrays (LibraryMember::passes_kept): a
  // boundary between the ranks' devices, NCCL's send and receive between
  // their GPUs.
  bool passes_kept(int from, int to) const override;
  // The member's paths for `directions` (LibraryMember::open_paths), over
  // every rank.
  void open_kept_paths(const std::vector<std::pair<int, int>>& directions) override;
  int64_t send_buffer_bytes() const override { return send_buffer_bytes_; }
  // The largest tag a message may carry (MPI_TAG_UB); a larger one is a plan
  // bug (logic_error).
  int64_t max_tag() const { return max_tag_; }

 protected:
  // An abort (Transport::abort) wakes this process's receives, which poll;
  // the other processes learn of it when the launcher stops the job.
  // MPI_Isend; the payload is kept until MPI has sent it. kQueued returns at
  // once. kLeft polls until the send completes locally where the message
  // goes eagerly over TCP (tcp_eager_bytes_of): its bytes have then reached
  // the socket, and the receiver was not waited for. Otherwise (shared
  // memory, a rendezvous, another transport layer) completing would wait
  // for the receive to be posted, which the plan does not order against
  // the stream's next op; it returns at once, as kQueued.
  void deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) override;
  // A matched probe then receive (MPI_Improbe, MPI_Mrecv): another thread's
  // receive cannot take the message in between. Polls, so an abort wakes it.
  std::vector<float> wait_for(int to, int from, int64_t tag) override;
  // kLibrary over every rank: MPI_Allreduce on a communicator of its own
  // (the member's AllReduce, sharing its bytes over that communicator, where
  // one was given); the other algorithms as Transport runs them.
  void run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) override;
  void run_all_reduce_kept(CollectivePeers& peers, std::span<KeptValues* const> arrays, int64_t floats,
                           float scale) override;
  // A header (the tag and the size) to the receiver on a communicator of
  // their own, then the member's send, both in one order: the member's
  // messages carry no tags, so the receiver reads a sender's headers in the
  // order sent and queues a receive for each (wait_for_kept).
  void deliver_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats) override;
  // The array of `tag` from `from`: the sender's next headers read, a
  // receive queued into a `make` array for each, until that tag's; those
  // received before their take_kept asks are held for it.
  PassedKept wait_for_kept(int to, int from, int64_t tag, const MakeKept& make) override;

 private:
  void check_own(int worker, const char* role) const;
  int mpi_tag(int64_t tag) const;
  // Frees the sends MPI has finished with; callers hold pending_mutex_.
  void reap_sends();

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm library_comm_ = MPI_COMM_NULL;  // the library's collectives, apart from the messages
  std::mutex library_mutex_;               // one collective at a time on it
  std::shared_ptr<LibraryMember> library_member_;
  int rank_ = 0;
  int64_t max_tag_ = 0;
  int64_t eager_bytes_ = 0;                       // tcp_eager_bytes_of this process's settings
  int64_t send_buffer_bytes_ = 0;                 // tcp_send_buffer_bytes_of them
  static constexpr int64_t kEagerHeaderBytes = 64;  // ob1's match header, rounded up
  std::mutex pending_mutex_;
  std::list<std::pair<MPI_Request, std::vector<float>>> pending_;  // sends in flight and their buffers
  // Passed kept arrays: their headers, in each sender's order, apart from
  // the messages.
  MPI_Comm kept_comm_ = MPI_COMM_NULL;
  std::mutex kept_send_mutex_;                           // a member's send and its header together
  std::vector<std::unique_ptr<KeptArrivals>> arrivals_;  // by sending rank
};

}  // namespace trainsim
