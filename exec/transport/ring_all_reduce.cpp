// Ring AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.2 — the bandwidth-
// optimal ring; docs/equations.md §2, allreduce/ring): a reduce-scatter and an
// allgather around the ring, p-1 steps each, one chunk per step.
#include "exec/transport/collectives.hpp"

namespace trainsim {

// docs/equations.md §2, allreduce/ring: 2(p-1) messages of n/p per member. In
// reduce-scatter step s rank r sends chunk r-s to r+1 and adds chunk r-s-1
// from r-1, so chunk c is summed along c, c+1, ..., c-1 and finished on rank
// c-1 alone; the allgather then copies finished chunks around unchanged.
void all_reduce_ring(CollectivePeers& peers, std::span<float> data) {
  const int p = peers.size();
  if (p == 1) return;
  const int r = peers.rank();
  const int next = (r + 1) % p;
  const int prev = (r - 1 + p) % p;
  const auto n = static_cast<int64_t>(data.size());
  const auto chunk = [&](int index) { return even_chunk(n, p, ((index % p) + p) % p); };
  for (int s = 0; s < p - 1; ++s) {  // reduce-scatter
    const Chunk out = chunk(r - s);
    const Chunk in = chunk(r - s - 1);
    peers.send_slice(next, data, out.offset, out.count);
    peers.recv_add(prev, data, in.offset, in.count);
  }
  for (int s = 0; s < p - 1; ++s) {  // allgather: rank r starts with chunk r+1 finished
    const Chunk out = chunk(r + 1 - s);
    const Chunk in = chunk(r - s);
    peers.send_slice(next, data, out.offset, out.count);
    peers.recv_into(prev, data, in.offset, in.count);
  }
}

}  // namespace trainsim
