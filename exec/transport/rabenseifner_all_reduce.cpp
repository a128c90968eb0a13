// Rabenseifner's AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.4;
// docs/equations.md §2, allreduce/Rabenseifner): a reduce-scatter by recursive
// halving, then an allgather by recursive doubling, on p' = 2^⌊lg p⌋ ranks
// after the fold-in of a non-power-of-two group.
#include "exec/transport/collectives.hpp"

namespace trainsim {
namespace {

// The values of chunks [first, last) of p' even chunks.
Chunk chunk_span(int64_t n, int parts, int first, int last) {
  if (first == last) return {even_chunk(n, parts, 0).offset, 0};
  const Chunk begin = even_chunk(n, parts, first);
  const Chunk end = even_chunk(n, parts, last - 1);
  return {begin.offset, end.offset + end.count - begin.offset};
}

}  // namespace

// docs/equations.md §2: halving sends n/2 + n/4 + ... = (p'-1)/p'·n, and the
// allgather as much again. In the halving round of distance d a rank keeps
// the half of its chunk range on its side of bit d and adds the partner's
// values for it; after lg p' rounds core rank q alone holds chunk q summed.
void all_reduce_rabenseifner(CollectivePeers& peers, std::span<float> data) {
  if (peers.size() == 1) return;
  const FoldedGroup folded = fold_in(peers, data);
  const auto n = static_cast<int64_t>(data.size());
  const int q = folded.new_rank;
  const int parts = folded.core_size;
  if (q >= 0) {
    int first = 0;
    int last = parts;  // chunk range this rank still reduces
    for (int distance = parts / 2; distance >= 1; distance /= 2) {
      const int partner = folded.rank_of(q ^ distance);
      const int middle = first + (last - first) / 2;
      const bool lower = (q & distance) == 0;
      const Chunk given = lower ? chunk_span(n, parts, middle, last) : chunk_span(n, parts, first, middle);
      const Chunk kept = lower ? chunk_span(n, parts, first, middle) : chunk_span(n, parts, middle, last);
      peers.send_slice(partner, data, given.offset, given.count);
      peers.recv_add(partner, data, kept.offset, kept.count);
      (lower ? last : first) = middle;
    }
    for (int distance = 1; distance < parts; distance *= 2) {  // allgather, the halving in reverse
      const int partner = folded.rank_of(q ^ distance);
      const int width = last - first;
      const bool lower = (q & distance) == 0;
      const Chunk mine = chunk_span(n, parts, first, last);
      const Chunk theirs =
          lower ? chunk_span(n, parts, last, last + width) : chunk_span(n, parts, first - width, first);
      peers.send_slice(partner, data, mine.offset, mine.count);
      peers.recv_into(partner, data, theirs.offset, theirs.count);
      if (lower) {
        last += width;
      } else {
        first -= width;
      }
    }
  }
  hand_back(peers, folded, data);
}

}  // namespace trainsim
