// The transport between workers: point-to-point messages of float32 values
// matched by (from, to, tag), and the collectives plans name (AllReduce,
// Broadcast, Barrier), written over those messages so the executed pattern is
// the one sim/ times. InProcessTransport (threads of one process) implements
// it; MPI and NCCL backends implement the same interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/collective.hpp"

namespace trainsim {

// Thrown to every sender and waiter once a transport is aborted (one worker
// failed), so the others stop instead of waiting forever.
class TransportAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a transport has carried since it was made; payload bytes only.
struct TrafficStats {
  std::vector<std::vector<int64_t>> pair_bytes;     // [from][to]: bytes sent, all traffic
  std::vector<std::vector<int64_t>> pair_messages;  // [from][to]: messages sent
  // tag -> bytes each worker sent inside the collectives run under that tag
  // (indexed by worker; 0 for workers outside the group).
  std::map<int64_t, std::vector<int64_t>> collective_bytes;

  int64_t sent_bytes(int worker) const;      // row `worker` of pair_bytes, summed
  int64_t received_bytes(int worker) const;  // column `worker`, summed
};

class CollectivePeers;
class KeptValues;
struct ExportedBoundary;  // exec/tensor/range_network.hpp

// An array of the receiving worker's device for a boundary passed to it
// device to device (Device::boundary_array), `floats` values its first
// writer sets.
using MakeKept = std::function<std::shared_ptr<const ExportedBoundary>(int64_t floats)>;
// A passed array as received: `floats` values in `array`.
struct PassedKept {
  std::shared_ptr<const ExportedBoundary> array;
  int64_t floats = 0;
};

// The arrays passed from one sender to one receiver whose messages, like
// NCCL's, carry no tags: the sender sends each one's header (its tag and
// size) ahead of it, in one order, and the receiver reads the headers in
// that order, queuing a receive for each; those received before their
// take_kept asks for them are held by tag.
class KeptArrivals {
 public:
  // The sender's next header read and its receive queued: (tag, array).
  using Next = std::function<std::pair<int64_t, PassedKept>()>;
  // The array of `tag`: one held before, or the next ones read until it comes.
  PassedKept take(int64_t tag, const Next& next) {
    const std::lock_guard<std::mutex> lock(mu_);
    for (;;) {
      auto it = by_tag_.find(tag);
      if (it != by_tag_.end()) {
        PassedKept taken = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) by_tag_.erase(it);
        return taken;
      }
      auto [read, passed] = next();
      by_tag_[read].push_back(std::move(passed));
    }
  }

 private:
  std::mutex mu_;  // one reader of the sender's headers at a time
  std::map<int64_t, std::deque<PassedKept>> by_tag_;
};

// When a send returns. kQueued: once the message is handed over, never
// waiting for the receiver (collectives post their sends, then receive).
// kLeft: once the message has left the sender (MPI: the send completed
// locally, its buffer free), so the sends of one plan stream take the link
// one after another, as the simulator runs a plan's send ops. On memory
// copies between threads the two are the same.
enum class SendReturns { kQueued, kLeft };

// Messages between two workers with the same tag arrive in the order they
// were sent (MPI's non-overtaking rule); messages of different tags or pairs
// in any order. A collective uses its tag for all its messages: every member
// calls it, collectives sharing a group and a tag run in the same order on
// every member, and point-to-point traffic does not reuse a collective's tag.
// Workers are 0..workers()-1; a bad worker or group is a plan bug (logic_error).
class Transport {
 public:
  explicit Transport(int workers);
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int workers() const { return workers_; }

  // Sends `payload` to `to`; returns as `returns` says.
  void send(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns = SendReturns::kQueued);
  // Blocks until the next message from `from` to `to` with `tag` arrives.
  std::vector<float> recv(int to, int from, int64_t tag);
  // `bytes` a message carried beside the transport (device to device, the
  // transport's send carrying none), counted as sent.
  void count_beside(int from, int to, int64_t bytes);

  // Sum over `group` (worker ids, the same list on every member), in place:
  // every member ends with the same bits. Blocks until this member is done.
  void all_reduce(int self, const std::vector<int>& group, int64_t tag, std::span<float> data,
                  CollectiveAlgorithm algorithm);
  // Whether the backend runs the library AllReduce over `group` where the
  // members' devices keep the arrays (all_reduce_kept): NCCL's, over their
  // GPUs. The same answer on every member.
  virtual bool sums_kept(const std::vector<int>& group) const;
  // The library AllReduce (CollectiveAlgorithm::kLibrary) of `arrays`
  // (`floats` values in all, kept by the caller's device: Device::
  // all_reduce_kept), each summed over `group` in place, then times `scale`
  // (the host's mean, one multiplication each), every member ending with the
  // same bits; a collective as all_reduce. Only where sums_kept(group).
  void all_reduce_kept(int self, const std::vector<int>& group, int64_t tag, std::span<KeptValues* const> arrays,
                       int64_t floats, float scale);
  // Whether the backend passes a boundary that `from`'s device keeps to
  // `to`'s device in another process without the hosts (pass_kept): NCCL's
  // send and receive between the ranks' GPUs. The same answer on both ends.
  virtual bool passes_kept(int from, int to) const;
  // Before a run's first pass_kept: what the backend needs for each listed
  // direction (sender, receiver), such as a communicator of the two. Every
  // process of the backend calls it with the same list (a collective); a
  // no-op where it passes nothing.
  virtual void open_kept_paths(const std::vector<std::pair<int, int>>& directions);
  // `values` (`floats` of them, kept by from's device) to `to`'s device,
  // matched there by take_kept with the same tag; returns once queued, the
  // array's later work ordered after the send; its bytes counted as sent
  // (count_beside: the message the caller sends with the tag is the one
  // counted). Only where passes_kept(from, to).
  void pass_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats);
  // What `from` passed with `tag`, received into an array `make` gives
  // (to's device's). Returns once the message is known, not once its values
  // have arrived: the array's later work waits for them.
  PassedKept take_kept(int to, int from, int64_t tag, const MakeKept& make);
  // `root`'s data to every member of `group` (binomial tree).
  void broadcast(int self, const std::vector<int>& group, int root, int64_t tag, std::span<float> data);
  // Returns once every member of `group` has entered the barrier.
  void barrier(int self, const std::vector<int>& group, int64_t tag);

  // Wakes every waiter with TransportAborted(why); later calls throw it too.
  // The first reason stands.
  void abort(const std::string& why);
  bool aborted() const { return aborted_.load(); }

  TrafficStats traffic() const;

  // Whether the backend runs CollectiveAlgorithm::kLibrary (the MPI
  // library's own AllReduce) over every worker.
  virtual bool has_library_all_reduce() const { return false; }
  // Bytes of a SendReturns::kLeft send that may still be on their way when
  // it returns (the socket send buffer its message is written into); 0 where
  // the send returns once the message has reached its receiver or is unknown.
  virtual int64_t send_buffer_bytes() const { return 0; }

 protected:
  // After abort() has set aborted(): the backend wakes the waiters it blocks
  // (a backend whose waits poll aborted() has none).
  virtual void wake_waiters() {}
  [[noreturn]] void throw_aborted() const;

  // The backend's message layer, called after the arguments are checked.
  virtual void deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) = 0;
  virtual std::vector<float> wait_for(int to, int from, int64_t tag) = 0;
  // pass_kept and take_kept, where passes_kept says the backend has them.
  virtual void deliver_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats);
  virtual PassedKept wait_for_kept(int to, int from, int64_t tag, const MakeKept& make);

  // The collectives' algorithms; the defaults run them over send/recv
  // (exec/transport/collectives.hpp). A backend with native collectives may
  // override them, keeping the contract above.
  virtual void run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm);
  virtual void run_broadcast(CollectivePeers& peers, int root_rank, std::span<float> data);
  // all_reduce_kept's sum, where sums_kept says the backend has one.
  virtual void run_all_reduce_kept(CollectivePeers& peers, std::span<KeptValues* const> arrays, int64_t floats,
                                   float scale);
  virtual void run_barrier(CollectivePeers& peers);

 private:
  void check_worker(int worker, const char* role) const;
  void check_group(int self, const std::vector<int>& group) const;
  void count_collective(int self, int64_t tag, int64_t bytes);

  int workers_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex why_mutex_;
  std::string why_;
  mutable std::mutex traffic_mutex_;
  TrafficStats traffic_;
};

}  // namespace trainsim
