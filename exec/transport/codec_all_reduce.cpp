// Ring AllReduce with a per-hop codec; see codec_all_reduce.hpp.
#include "exec/transport/codec_all_reduce.hpp"

namespace trainsim {

void all_reduce_ring_codec(CollectivePeers& peers, std::span<float> data, const HopCodec& codec) {
  const int p = peers.size();
  if (p == 1) return;
  const int r = peers.rank();
  const int next = (r + 1) % p;
  const int prev = (r - 1 + p) % p;
  const auto n = static_cast<int64_t>(data.size());
  const auto chunk = [&](int index) { return even_chunk(n, p, ((index % p) + p) % p); };
  const auto slice = [&](const Chunk& c) { return data.subspan(static_cast<size_t>(c.offset), static_cast<size_t>(c.count)); };
  std::vector<float> partial;
  for (int s = 0; s < p - 1; ++s) {  // reduce-scatter: seed 002's transmit-and-reduce step per hop
    const Chunk out = chunk(r - s);
    const Chunk in = chunk(r - s - 1);
    peers.send(next, codec.encode(slice(out)));
    const std::vector<float> message = peers.recv(prev);
    partial.assign(static_cast<size_t>(in.count), 0.0f);
    codec.decode(message, partial);
    std::span<float> local = slice(in);
    for (size_t i = 0; i < partial.size(); ++i) local[i] = partial[i] + local[i];
  }
  // Rank r finished chunk r+1: its encoding is the one message every member decodes.
  std::vector<float> message = codec.encode(slice(chunk(r + 1)));
  codec.decode(message, slice(chunk(r + 1)));
  for (int s = 0; s < p - 1; ++s) {  // allgather: forward finished messages unchanged
    peers.send(next, message);
    message = peers.recv(prev);
    codec.decode(message, slice(chunk(r - s)));
  }
}

}  // namespace trainsim
