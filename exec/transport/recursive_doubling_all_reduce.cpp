// Recursive-doubling AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.1;
// docs/equations.md §2, allreduce/recursive doubling): lg p' rounds exchanging the
// whole vector with the partner at distance 2^k, after the fold-in of a
// non-power-of-two group.
#include "exec/transport/collectives.hpp"

namespace trainsim {

// docs/equations.md §2: lg p' messages of n per core member. Partners add each
// other's vectors (a + b on one side, b + a on the other, which IEEE
// addition makes the same bits), so after every round both hold one value.
void all_reduce_recursive_doubling(CollectivePeers& peers, std::span<float> data) {
  if (peers.size() == 1) return;
  const FoldedGroup folded = fold_in(peers, data);
  const auto n = static_cast<int64_t>(data.size());
  if (folded.new_rank >= 0) {
    for (int distance = 1; distance < folded.core_size; distance *= 2) {
      const int partner = folded.rank_of(folded.new_rank ^ distance);
      peers.send_slice(partner, data, 0, n);
      peers.recv_add(partner, data, 0, n);
    }
  }
  hand_back(peers, folded, data);
}

}  // namespace trainsim
