// Collective algorithms over a transport's point-to-point messages, one file
// each, as Thakur, Rabenseifner and Gropp (2005) describe them and
// sim/cost/collectives/ times them (docs/equations.md §2). Every element of a
// result is summed on one member in one order and copied to the others, so
// all members end with the same bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/transport/transport.hpp"

namespace trainsim {

// One member's view of a collective: its rank (index in the group) and
// messages to other ranks under the collective's tag, counting what it sends.
class CollectivePeers {
 public:
  CollectivePeers(Transport& transport, int self, const std::vector<int>& group, int64_t tag);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(group_.size()); }
  const std::vector<int>& group() const { return group_; }
  int64_t sent_bytes() const { return sent_bytes_; }

  void send(int to_rank, std::vector<float> payload);
  // A copy of data[offset, offset + count).
  void send_slice(int to_rank, std::span<const float> data, int64_t offset, int64_t count);
  std::vector<float> recv(int from_rank);
  // Receives `count` values and adds them into data[offset, ...), in the
  // order data[i] = data[i] + received[i].
  void recv_add(int from_rank, std::span<float> data, int64_t offset, int64_t count);
  // Receives `count` values into data[offset, ...).
  void recv_into(int from_rank, std::span<float> data, int64_t offset, int64_t count);

 private:
  Transport& transport_;
  const std::vector<int>& group_;
  int self_;
  int rank_ = 0;
  int64_t tag_;
  int64_t sent_bytes_ = 0;
};

// Part `index` of `n` values split into `parts` as evenly as possible: the
// first n mod parts parts hold one value more. Parts may be empty (n < parts).
struct Chunk {
  int64_t offset = 0;
  int64_t count = 0;
};
Chunk even_chunk(int64_t n, int parts, int index);

// Ring AllReduce: reduce-scatter then allgather, p-1 steps each, chunk i of
// p (even_chunk) finished on rank i-1 (mod p). Per member 2(p-1)/p·n values
// sent, up to chunk rounding, in messages of at most `segment` values: a
// rank forwards each segment as soon as it has it. The segments change no
// sum: every value is added in the same order.
inline constexpr int64_t kRingSegmentValues = int64_t{1} << 16;  // 256 KiB of float32
void all_reduce_ring(CollectivePeers& peers, std::span<float> data, int64_t segment = kRingSegmentValues);

// Recursive doubling: lg p' exchanges of the whole vector with the partner
// at distance 2^k. Rabenseifner: recursive-halving reduce-scatter, then
// recursive-doubling allgather. Both run on p' = 2^⌊lg p⌋ ranks after the
// fold-in step below.
void all_reduce_recursive_doubling(CollectivePeers& peers, std::span<float> data);
void all_reduce_rabenseifner(CollectivePeers& peers, std::span<float> data);

// Binomial-tree reduce onto rank 0, then binomial-tree broadcast from it.
void all_reduce_tree(CollectivePeers& peers, std::span<float> data);
void reduce_tree(CollectivePeers& peers, int root_rank, std::span<float> data);
void broadcast_tree(CollectivePeers& peers, int root_rank, std::span<float> data);

// Dissemination barrier: ⌈lg p⌉ rounds of empty messages to rank + 2^k.
void barrier_dissemination(CollectivePeers& peers);

// The fold-in of a non-power-of-two group (Thakur et al. 2005 §4, as MPICH
// does it): with r = p - p', the even ranks below 2r hand their vector to the
// next odd rank, which adds it, and sit out; the other p' ranks run `core`
// under new ranks 0..p'-1; then the odd ranks below 2r hand the result back.
struct FoldedGroup {
  int new_rank = -1;  // -1: this rank sits out the core
  int core_size = 1;  // p'
  int extra = 0;      // r

  int rank_of(int core_rank) const { return core_rank < extra ? 2 * core_rank + 1 : core_rank + extra; }
};
FoldedGroup fold_in(CollectivePeers& peers, std::span<float> data);
void hand_back(CollectivePeers& peers, const FoldedGroup& folded, std::span<float> data);

}  // namespace trainsim
