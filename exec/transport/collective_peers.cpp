// CollectivePeers (a member's ranked view of a group), even chunking, the
// power-of-two fold-in shared by recursive doubling and Rabenseifner, and
// the dissemination barrier.
#include <algorithm>

#include "exec/transport/collectives.hpp"
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

CollectivePeers::CollectivePeers(Transport& transport, int self, const std::vector<int>& group, int64_t tag)
    : transport_(transport), group_(group), self_(self), tag_(tag) {
  const auto at = std::find(group.begin(), group.end(), self);
  TRAINSIM_CHECK(at != group.end(), "CollectivePeers: worker " + std::to_string(self) + " is not in the group");
  rank_ = static_cast<int>(at - group.begin());
}

void CollectivePeers::send(int to_rank, std::vector<float> payload) {
  const auto bytes = static_cast<int64_t>(payload.size() * sizeof(float));
  transport_.send(self_, group_.at(static_cast<size_t>(to_rank)), tag_, std::move(payload));
  sent_bytes_ += bytes;
}

void CollectivePeers::send_slice(int to_rank, std::span<const float> data, int64_t offset, int64_t count) {
  const auto slice = data.subspan(static_cast<size_t>(offset), static_cast<size_t>(count));
  send(to_rank, std::vector<float>(slice.begin(), slice.end()));
}

std::vector<float> CollectivePeers::recv(int from_rank) {
  return transport_.recv(self_, group_.at(static_cast<size_t>(from_rank)), tag_);
}

void CollectivePeers::recv_add(int from_rank, std::span<float> data, int64_t offset, int64_t count) {
  const std::vector<float> received = recv(from_rank);
  TRAINSIM_CHECK(static_cast<int64_t>(received.size()) == count,
                 "collective: received " + std::to_string(received.size()) + " values, expected " +
                     std::to_string(count) + " (members disagree on the data size)");
  float* out = data.data() + offset;
  for (int64_t i = 0; i < count; ++i) out[i] = out[i] + received[static_cast<size_t>(i)];
}

void CollectivePeers::recv_into(int from_rank, std::span<float> data, int64_t offset, int64_t count) {
  const std::vector<float> received = recv(from_rank);
  TRAINSIM_CHECK(static_cast<int64_t>(received.size()) == count,
                 "collective: received " + std::to_string(received.size()) + " values, expected " +
                     std::to_string(count) + " (members disagree on the data size)");
  std::copy(received.begin(), received.end(), data.begin() + offset);
}

Chunk even_chunk(int64_t n, int parts, int index) {
  TRAINSIM_CHECK(parts >= 1 && index >= 0 && index < parts, "even_chunk: index outside 0..parts-1");
  const int64_t base = n / parts;
  const int64_t larger = n % parts;  // the first `larger` parts hold base + 1
  const int64_t before_larger = std::min<int64_t>(index, larger);
  return {index * base + before_larger, base + (index < larger ? 1 : 0)};
}

// Thakur et al. 2005 §4 (MPICH's allreduce): ranks 2i and 2i+1 for i < r
// pair up; 2i+1 adds 2i's vector (α + nβ + nγ, add_power_of_two_fold_s).
FoldedGroup fold_in(CollectivePeers& peers, std::span<float> data) {
  FoldedGroup folded;
  folded.core_size = static_cast<int>(floor_power_of_two(peers.size()));
  folded.extra = peers.size() - folded.core_size;
  const int rank = peers.rank();
  const auto n = static_cast<int64_t>(data.size());
  if (rank < 2 * folded.extra) {
    if (rank % 2 == 0) {
      peers.send_slice(rank + 1, data, 0, n);
      return folded;  // sits out the core
    }
    peers.recv_add(rank - 1, data, 0, n);
    folded.new_rank = rank / 2;
  } else {
    folded.new_rank = rank - folded.extra;
  }
  return folded;
}

// The hand-back after the core (α + nβ): the ranks that sat out get the result.
void hand_back(CollectivePeers& peers, const FoldedGroup& folded, std::span<float> data) {
  const int rank = peers.rank();
  if (rank >= 2 * folded.extra) return;
  const auto n = static_cast<int64_t>(data.size());
  if (rank % 2 == 1) {
    peers.send_slice(rank - 1, data, 0, n);
  } else {
    peers.recv_into(rank + 1, data, 0, n);
  }
}

// Dissemination barrier (Hensgen, Finkel and Manber 1988): after round k a
// rank has heard, directly or not, from the 2^(k+1) ranks before it.
void barrier_dissemination(CollectivePeers& peers) {
  const int p = peers.size();
  for (int distance = 1; distance < p; distance *= 2) {
    peers.send((peers.rank() + distance) % p, {});
    peers.recv((peers.rank() - distance + p) % p);
  }
}

}  // namespace trainsim
