// Transport's checked entry points and traffic counters; the collectives run
// the algorithms of collectives.hpp over the backend's messages.
#include "exec/transport/transport.hpp"

#include <algorithm>
#include <numeric>

#include "exec/transport/collectives.hpp"
#include "model/error.hpp"

namespace trainsim {

int64_t TrafficStats::sent_bytes(int worker) const {
  const auto& row = pair_bytes.at(static_cast<size_t>(worker));
  return std::accumulate(row.begin(), row.end(), int64_t{0});
}

int64_t TrafficStats::received_bytes(int worker) const {
  int64_t bytes = 0;
  for (const auto& row : pair_bytes) bytes += row.at(static_cast<size_t>(worker));
  return bytes;
}

Transport::Transport(int workers) : workers_(workers) {
  TRAINSIM_CHECK(workers >= 1, "a transport needs at least one worker");
  const auto n = static_cast<size_t>(workers);
  traffic_.pair_bytes.assign(n, std::vector<int64_t>(n, 0));
  traffic_.pair_messages.assign(n, std::vector<int64_t>(n, 0));
}

void Transport::abort(const std::string& why) {
  {
    const std::lock_guard<std::mutex> lock(why_mutex_);
    if (aborted_.load()) return;  // the first reason stands
    why_ = why;
    aborted_.store(true);
  }
  wake_waiters();
}

void Transport::throw_aborted() const {
  const std::lock_guard<std::mutex> lock(why_mutex_);
  throw TransportAborted("transport aborted: " + why_);
}

void Transport::check_worker(int worker, const char* role) const {
  TRAINSIM_CHECK(worker >= 0 && worker < workers_, std::string("transport: ") + role + " worker " +
                                                       std::to_string(worker) + " is outside 0.." +
                                                       std::to_string(workers_ - 1));
}

void Transport::check_group(int self, const std::vector<int>& group) const {
  TRAINSIM_CHECK(!group.empty(), "transport: a collective needs a non-empty group");
  std::vector<int> sorted = group;
  std::sort(sorted.begin(), sorted.end());
  TRAINSIM_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
                 "transport: a collective group lists a worker twice");
  for (int member : group) check_worker(member, "group");
  TRAINSIM_CHECK(std::find(group.begin(), group.end(), self) != group.end(),
                 "transport: worker " + std::to_string(self) + " runs a collective of a group it is not in");
}

void Transport::send(int from, int to, int64_t tag, std::vector<float> payload, SendReturns returns) {
  check_worker(from, "sending");
  check_worker(to, "receiving");
  const auto bytes = static_cast<int64_t>(payload.size() * sizeof(float));
  deliver(from, to, tag, std::move(payload), returns);
  // Counted once the message is handed over: an aborted send carried nothing.
  const std::lock_guard<std::mutex> lock(traffic_mutex_);
  traffic_.pair_bytes[static_cast<size_t>(from)][static_cast<size_t>(to)] += bytes;
  ++traffic_.pair_messages[static_cast<size_t>(from)][static_cast<size_t>(to)];
}

void Transport::count_beside(int from, int to, int64_t bytes) {
  check_worker(from, "sending");
  check_worker(to, "receiving");
  const std::lock_guard<std::mutex> lock(traffic_mutex_);
  traffic_.pair_bytes[static_cast<size_t>(from)][static_cast<size_t>(to)] += bytes;
}

std::vector<float> Transport::recv(int to, int from, int64_t tag) {
  check_worker(to, "receiving");
  check_worker(from, "sending");
  return wait_for(to, from, tag);
}

bool Transport::passes_kept(int, int) const { return false; }

void Transport::open_kept_paths(const std::vector<std::pair<int, int>>&) {}

void Transport::pass_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats) {
  check_worker(from, "sending");
  check_worker(to, "receiving");
  TRAINSIM_CHECK(passes_kept(from, to), "transport: a kept array passed on a backend that passes none");
  deliver_kept(from, to, tag, values, floats);
  count_beside(from, to, floats * static_cast<int64_t>(sizeof(float)));
}

PassedKept Transport::take_kept(int to, int from, int64_t tag, const MakeKept& make) {
  check_worker(to, "receiving");
  check_worker(from, "sending");
  TRAINSIM_CHECK(passes_kept(from, to), "transport: a kept array taken on a backend that passes none");
  return wait_for_kept(to, from, tag, make);
}

void Transport::deliver_kept(int, int, int64_t, const ExportedBoundary&, int64_t) {
  TRAINSIM_CHECK(false, "transport: a kept array passed on a backend that passes none");
}

PassedKept Transport::wait_for_kept(int, int, int64_t, const MakeKept&) {
  throw std::logic_error("transport: a kept array taken on a backend that passes none");
}

void Transport::count_collective(int self, int64_t tag, int64_t bytes) {
  const std::lock_guard<std::mutex> lock(traffic_mutex_);
  auto [entry, inserted] = traffic_.collective_bytes.try_emplace(tag);
  if (inserted) entry->second.assign(static_cast<size_t>(workers_), 0);
  entry->second[static_cast<size_t>(self)] += bytes;
}

void Transport::all_reduce(int self, const std::vector<int>& group, int64_t tag, std::span<float> data,
                           CollectiveAlgorithm algorithm) {
  check_group(self, group);
  CollectivePeers peers(*this, self, group, tag);
  run_all_reduce(peers, data, algorithm);
  count_collective(self, tag, peers.sent_bytes());
}

bool Transport::sums_kept(const std::vector<int>&) const { return false; }

void Transport::all_reduce_kept(int self, const std::vector<int>& group, int64_t tag,
                                std::span<KeptValues* const> arrays, int64_t floats, float scale) {
  check_group(self, group);
  TRAINSIM_CHECK(sums_kept(group), "transport: an AllReduce of kept arrays on a backend that sums none");
  CollectivePeers peers(*this, self, group, tag);
  run_all_reduce_kept(peers, arrays, floats, scale);
  count_collective(self, tag, peers.sent_bytes());
}

void Transport::run_all_reduce_kept(CollectivePeers&, std::span<KeptValues* const>, int64_t, float) {
  TRAINSIM_CHECK(false, "transport: an AllReduce of kept arrays on a backend that sums none");
}

void Transport::broadcast(int self, const std::vector<int>& group, int root, int64_t tag, std::span<float> data) {
  check_group(self, group);
  const auto root_at = std::find(group.begin(), group.end(), root);
  TRAINSIM_CHECK(root_at != group.end(), "transport: broadcast root " + std::to_string(root) + " is not in the group");
  CollectivePeers peers(*this, self, group, tag);
  run_broadcast(peers, static_cast<int>(root_at - group.begin()), data);
  count_collective(self, tag, peers.sent_bytes());
}

void Transport::barrier(int self, const std::vector<int>& group, int64_t tag) {
  check_group(self, group);
  CollectivePeers peers(*this, self, group, tag);
  run_barrier(peers);
  count_collective(self, tag, peers.sent_bytes());
}

void Transport::run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing:
      return all_reduce_ring(peers, data);
    case CollectiveAlgorithm::kRecursiveDoubling:
      return all_reduce_recursive_doubling(peers, data);
    case CollectiveAlgorithm::kRabenseifner:
      return all_reduce_rabenseifner(peers, data);
    case CollectiveAlgorithm::kBinomialTree:
      return all_reduce_tree(peers, data);
    case CollectiveAlgorithm::kLibrary:
      break;  // has_library_all_reduce() said no; the interpreter refuses such plans first
  }
  TRAINSIM_CHECK(false, "transport: unknown collective algorithm");
}

void Transport::run_broadcast(CollectivePeers& peers, int root_rank, std::span<float> data) {
  broadcast_tree(peers, root_rank, data);
}

void Transport::run_barrier(CollectivePeers& peers) { barrier_dissemination(peers); }

TrafficStats Transport::traffic() const {
  const std::lock_guard<std::mutex> lock(traffic_mutex_);
  return traffic_;
}

}  // namespace trainsim
