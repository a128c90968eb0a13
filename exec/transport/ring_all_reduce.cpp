// Ring AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.2 — the bandwidth-
// optimal ring; docs/equations.md §2, allreduce/ring): a reduce-scatter and an
// allgather around the ring, p-1 steps each, one chunk per step, each chunk
// forwarded segment by segment as it arrives.
#include <algorithm>

#include "exec/transport/collectives.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

// A chunk's messages: segments of at most `segment` values, one (maybe
// empty) for an empty chunk.
int64_t segment_count(const Chunk& c, int64_t segment) {
  return std::max<int64_t>(1, (c.count + segment - 1) / segment);
}

Chunk segment_of(const Chunk& c, int64_t segment, int64_t k) {
  return {c.offset + k * segment, std::clamp<int64_t>(c.count - k * segment, 0, segment)};
}

}  // namespace

// docs/equations.md §2, allreduce/ring: 2(p-1) chunks of n/p per member. In
// reduce-scatter step s rank r sends chunk r-s to r+1 and adds chunk r-s-1
// from r-1, so chunk c is summed along c, c+1, ..., c-1 and finished on rank
// c-1 alone; the allgather then copies finished chunks around unchanged.
// What a rank receives at one step is what it sends at the next (the last
// reduce-scatter step's chunk is the allgather's first), so it sends each
// segment on once it has added or copied it: the link carries one step's
// segments while the next rank still receives the previous ones.
void all_reduce_ring(CollectivePeers& peers, std::span<float> data, int64_t segment) {
  const int p = peers.size();
  if (p == 1) return;
  TRAINSIM_CHECK(segment >= 1, "all_reduce_ring: a segment holds at least one value");
  const int r = peers.rank();
  const int next = (r + 1) % p;
  const int prev = (r - 1 + p) % p;
  const auto n = static_cast<int64_t>(data.size());
  const auto chunk = [&](int index) { return even_chunk(n, p, ((index % p) + p) % p); };
  const Chunk own = chunk(r);
  for (int64_t k = 0; k < segment_count(own, segment); ++k) {
    const Chunk s = segment_of(own, segment, k);
    peers.send_slice(next, data, s.offset, s.count);
  }
  const int steps = 2 * (p - 1);
  for (int step = 0; step < steps; ++step) {
    const bool reduces = step < p - 1;  // reduce-scatter step `step`, else allgather step step-(p-1)
    const Chunk in = reduces ? chunk(r - step - 1) : chunk(r - (step - (p - 1)));
    for (int64_t k = 0; k < segment_count(in, segment); ++k) {
      const Chunk s = segment_of(in, segment, k);
      if (reduces) {
        peers.recv_add(prev, data, s.offset, s.count);
      } else {
        peers.recv_into(prev, data, s.offset, s.count);
      }
      if (step + 1 < steps) peers.send_slice(next, data, s.offset, s.count);
    }
  }
}

}  // namespace trainsim
