// Ring AllReduce over a lossy wire (Pipe-SGD, seed 002 §3.2, Fig. 3b): every
// hop of the reduce-scatter carries the partial sum encoded; the receiver
// decodes it, adds its own float32 values and encodes the new partial sum for
// the next hop. The finished chunk is encoded once and the allgather forwards
// that message unchanged, so every member decodes the same bits.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "exec/transport/collectives.hpp"

namespace trainsim {

// A wire format: `encode` turns values into the message sent (float words);
// `decode` writes a message's out.size() values into `out`.
struct HopCodec {
  std::function<std::vector<float>(std::span<const float> values)> encode;
  std::function<void(std::span<const float> message, std::span<float> out)> decode;
};

// The ring of all_reduce_ring (chunk c summed along ranks c, c+1, ..., c−1)
// with `codec` applied at each hop: chunk c's result is
// decode(encode(... decode(encode(g_c)) + g_{c+1} ...) + g_{c−1}), the chain
// exec/optim/pipesgd.hpp's compressed_chain_sum forms. With an exact codec
// this is all_reduce_ring's sum, bit for bit.
void all_reduce_ring_codec(CollectivePeers& peers, std::span<float> data, const HopCodec& codec);

}  // namespace trainsim
