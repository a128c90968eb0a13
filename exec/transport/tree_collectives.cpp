// Binomial-tree reduce and broadcast (Thakur, Rabenseifner, Gropp 2005 §3-4;
// docs/equations.md §2, reduce/binomial tree and broadcast/binomial tree), and
// the tree AllReduce built from them.
#include "exec/transport/collectives.hpp"

namespace trainsim {

// docs/equations.md §2, reduce/binomial tree: ⌈lg p⌉ rounds. Relative rank v
// receives from v + 2^k while bit k of v is clear, then sends its partial
// sum to v - 2^k and stops; the root ends with everything.
void reduce_tree(CollectivePeers& peers, int root_rank, std::span<float> data) {
  const int p = peers.size();
  const int v = (peers.rank() - root_rank + p) % p;
  const auto n = static_cast<int64_t>(data.size());
  const auto rank_of = [&](int relative) { return (relative + root_rank) % p; };
  for (int mask = 1; mask < p; mask *= 2) {
    if ((v & mask) != 0) {
      peers.send_slice(rank_of(v - mask), data, 0, n);
      return;
    }
    if (v + mask < p) peers.recv_add(rank_of(v + mask), data, 0, n);
  }
}

// docs/equations.md §2, broadcast/binomial tree: ⌈lg p⌉(α + nβ). Relative rank v
// receives from v minus its lowest set bit, then sends to v + 2^k for every
// 2^k below that bit.
void broadcast_tree(CollectivePeers& peers, int root_rank, std::span<float> data) {
  const int p = peers.size();
  const int v = (peers.rank() - root_rank + p) % p;
  const auto n = static_cast<int64_t>(data.size());
  const auto rank_of = [&](int relative) { return (relative + root_rank) % p; };
  int mask = 1;
  while (mask < p) {
    if ((v & mask) != 0) {
      peers.recv_into(rank_of(v - mask), data, 0, n);
      break;
    }
    mask *= 2;
  }
  for (mask /= 2; mask >= 1; mask /= 2) {
    if (v + mask < p) peers.send_slice(rank_of(v + mask), data, 0, n);
  }
}

// allreduce_tree_s: a binomial reduce onto rank 0 and a binomial broadcast
// from it; only rank 0 holds the finished sum, the others copy it.
void all_reduce_tree(CollectivePeers& peers, std::span<float> data) {
  if (peers.size() == 1) return;
  reduce_tree(peers, 0, data);
  broadcast_tree(peers, 0, data);
}

}  // namespace trainsim
