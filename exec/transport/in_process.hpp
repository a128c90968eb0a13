// The in-process transport: workers are threads of one process and a message
// is a moved buffer in the receiver's mailbox (a mutex, a condition variable
// and one FIFO queue per (sender, tag)). run_workers starts one thread per
// worker and turns the first failure into an abort of the others.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/transport/transport.hpp"

namespace trainsim {

// Passes an array one worker's device keeps to another worker's device of
// the process without the host, where the two cannot read each other's
// memory: NCCL's send and receive between GPUs that are not peers. Like
// NCCL's, its messages carry no tags: the n-th send from a worker to
// another meets that one's n-th receive from it.
class KeptPasser {
 public:
  virtual ~KeptPasser() = default;
  // What it needs for each listed direction (sending worker, receiving
  // worker) not opened before (NCCL: a communicator of the two GPUs), before
  // a run's workers start; the transport's next run may open more. Gives up
  // where `aborted` turns true.
  virtual void open(std::span<const std::pair<int, int>> directions, const std::function<bool()>& aborted) = 0;
  // `values` (`floats` of them, from's device's) to `to`, queued after their
  // work, their later work after the send; false where `aborted` turned
  // true while it waited.
  virtual bool send(int from, int to, KeptValues& values, int64_t floats, const std::function<bool()>& aborted) = 0;
  // The next array from `from` into `into` (`floats` values, to's device's),
  // queued after into's work, its later work after the receive.
  virtual bool recv(int to, int from, KeptValues& into, int64_t floats, const std::function<bool()>& aborted) = 0;
  // When the transport aborts (a worker failed): messages queued on the
  // devices that will never be matched are ended (NCCL: its communicators
  // aborted), so that no wait on them, or on the devices' memory being
  // freed, lasts for ever; later sends and receives return false. Called
  // from the failing worker's thread while others may be sending.
  virtual void abandon() {}
};

class InProcessTransport : public Transport {
 public:
  // recv_timeout_s > 0: a recv waiting longer aborts the transport (a plan
  // that deadlocks fails instead of hanging); 0 waits for ever.
  explicit InProcessTransport(int workers, double recv_timeout_s = 0);

  // Boundaries between devices that keep arrays passed by `passer` (given
  // before the run), each one's header (tag, size) ahead of it in the
  // mailbox of its direction.
  void pass_kept_by(std::shared_ptr<KeptPasser> passer);
  bool passes_kept(int from, int to) const override;
  void open_kept_paths(const std::vector<std::pair<int, int>>& directions) override;

 protected:
  void wake_waiters() override;
  // A copy into the receiver's mailbox: queued and gone at once.
  void deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) override;
  std::vector<float> wait_for(int to, int from, int64_t tag) override;
  // The header into the direction's queue, then the passer's send, both
  // in one order.
  void deliver_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats) override;
  // The sender's headers read in their order, a receive queued into a `make`
  // array for each, until the one of `tag` (KeptArrivals).
  PassedKept wait_for_kept(int to, int from, int64_t tag, const MakeKept& make) override;

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::pair<int, int64_t>, std::deque<std::vector<float>>> queues;  // (from, tag) -> FIFO
  };
  // One direction's passed arrays: their headers (tag, floats) in the order sent.
  struct KeptDirection {
    std::mutex send_mutex;  // a header and its send together
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<std::pair<int64_t, int64_t>> headers;
    KeptArrivals arrivals;
  };
  // Blocks until `ready` (called under `lock`) or an abort, and aborts the
  // transport past the timeout, naming what (`what`: "a message") worker
  // `to` waited for.
  void wait_until(std::condition_variable& arrived, std::unique_lock<std::mutex>& lock,
                  const std::function<bool()>& ready, int to, int from, int64_t tag, const char* what);
  KeptDirection& direction(int from, int to) { return *kept_[static_cast<size_t>(from * workers() + to)]; }

  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // one per receiving worker
  double recv_timeout_s_;
  std::shared_ptr<KeptPasser> passer_;
  std::vector<std::unique_ptr<KeptDirection>> kept_;  // [from * workers + to], made with the passer
};

// Runs body(w) for w = 0..threads-1, each on its own thread, and joins them.
// When one throws, the transport is aborted so the others stop, and the
// first failure (not the TransportAborted it caused elsewhere) is rethrown.
void run_workers(Transport& transport, int threads, const std::function<void(int)>& body);

}  // namespace trainsim
