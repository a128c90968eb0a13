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
#include <string>
#include <utility>
#include <vector>

#include "exec/transport/transport.hpp"

namespace trainsim {

class InProcessTransport : public Transport {
 public:
  // recv_timeout_s > 0: a recv waiting longer aborts the transport (a plan
  // that deadlocks fails instead of hanging); 0 waits for ever.
  explicit InProcessTransport(int workers, double recv_timeout_s = 0);

 protected:
  void wake_waiters() override;
  // A copy into the receiver's mailbox: queued and gone at once.
  void deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) override;
  std::vector<float> wait_for(int to, int from, int64_t tag) override;

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::pair<int, int64_t>, std::deque<std::vector<float>>> queues;  // (from, tag) -> FIFO
  };

  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // one per receiving worker
  double recv_timeout_s_;
};

// Runs body(w) for w = 0..threads-1, each on its own thread, and joins them.
// When one throws, the transport is aborted so the others stop, and the
// first failure (not the TransportAborted it caused elsewhere) is rethrown.
void run_workers(Transport& transport, int threads, const std::function<void(int)>& body);

}  // namespace trainsim
