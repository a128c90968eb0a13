// A ring AllReduce across machines on cores the workers share
// (Cluster::shared_cores), hop by hop as the executor runs it
// (exec/transport/ring_all_reduce.cpp, codec_all_reduce.cpp): each member
// does a piece of core work (packing; the reduce-scatter's decode, reduction
// and encode; the allgather's decode), sends its chunk to the next member,
// and starts its next piece once the previous member's chunk has arrived.
// The pieces are jobs on the members' cores beside their compute
// (shared_cores.cpp), so a member whose core computes falls behind and
// holds the ring back hop by hop, and the compute beside the pieces slows
// by the cores they take; the members end apart. A chunk takes bytes·β of
// its link after the chunk before it (the NICs' buckets first let across
// what they hold) and arrives α later, as the collective is priced
// (docs/equations.md §2, allreduce/ring).
#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {

// The pieces' work from the collective's price: packing spread over the
// 2(p-1)+1 pieces, a chunk's γ (docs/equations.md §2), and the codec's rates
// on a chunk's float32 bytes (ring_codec_s's encodes and decodes, one each).
void Engine::plan_hops(Collective& c, double pack_s) {
  const LinkParams link = collective_link_for(cluster_, true);
  const auto p = static_cast<double>(c.members);
  c.hops = true;
  c.compute_rate = 1;  // the pieces take the cores as jobs there, not as a rate
  c.shared_rate = 1;
  c.hop_bytes = c.bytes / p;
  c.hop_pack_ns = pack_s * kNsPerS / (2 * p - 1);
  c.hop_reduce_ns = c.hop_bytes * link.gamma_s_per_byte * kNsPerS;
  c.hop_sync_ns = duration_ns(barrier_s(c.members, cluster_.collective.sync_s), collective_ops_[c.first_slot]);
  if (c.codec != Codec::kNone) {
    const std::string compression = codec_name(c.codec);
    const CodecRates& rates = codec_rates(cluster_, compression);
    const double float_bytes = c.hop_bytes / wire_fraction(compression);
    if (rates.encode_bytes_per_s > 0) c.hop_encode_ns = float_bytes / rates.encode_bytes_per_s * kNsPerS;
    if (rates.decode_bytes_per_s > 0) c.hop_decode_ns = float_bytes / rates.decode_bytes_per_s * kNsPerS;
  }
}

// Piece 0 encodes the member's own chunk; pieces 1 .. p-1 decode the chunk
// received, reduce it and encode it on (piece p-1 also decodes the finished
// chunk it keeps); pieces p .. 2(p-1) decode the allgather's chunks.
double Engine::hop_piece_ns(const Collective& c, int32_t piece) const {
  double ns = c.hop_pack_ns;
  if (piece == 0) return ns + c.hop_encode_ns;
  ns += c.hop_decode_ns;
  if (piece < c.members) ns += c.hop_reduce_ns + c.hop_encode_ns;
  if (piece == c.members - 1) ns += c.hop_decode_ns;
  return ns;
}

// Every member ready: the call's t_sync, then each member's first piece. The
// NICs' buckets are taken once for the whole collective (FlowNetwork::hold_nics).
void Engine::start_hops(Collective& c) {
  const double burst = take_links(c);
  c.hop_members_left = c.members;
  for (int32_t m = 0; m < c.members; ++m) {
    hop_members_[c.first_slot + m] = HopMember{0, -1, false, burst, now_ns_, false};
    const OpId op = collective_ops_[c.first_slot + m];
    push(later_ns(now_ns_, c.hop_sync_ns, op), op, kHandedOff | (kHopArrival << 2));
  }
}

// A member starts its next piece once it has the chunk that piece needs and
// its core is not busy with its previous one. A member that waited for the
// chunk polled for it (the transport polls and yields): its piece waits
// until the compute on its core lets the pollers in (shared_cores.cpp). Its
// first piece follows its call at once.
void Engine::advance_hop(int32_t slot, bool polled) {
  HopMember& h = hop_members_[slot];
  if (h.working || h.polling || h.received < h.next_piece) return;
  const OpId op = collective_ops_[slot];
  const int32_t core = core_of_worker_[states_[op].worker];
  if (polled && core_computes(core)) {
    h.polling = true;
    pollers_[core].push_back(Poller{op, CoreJob::kHopPiece, 0});
    return;
  }
  start_hop_piece(slot);
}

// The pieces' prices hold every worker of a core at work at once (the
// probe's rates, measured so), so a piece's work at the core's full rate is
// its price over that count.
void Engine::start_hop_piece(int32_t slot) {
  HopMember& h = hop_members_[slot];
  const OpId op = collective_ops_[slot];
  const int32_t worker = states_[op].worker;
  h.polling = false;
  h.working = true;
  const double sharing = std::max(1, workers_on_core_[core_of_worker_[worker]]);
  add_core_job(worker, op, CoreJob::kHopPiece, hop_piece_ns(collectives_[states_[op].index], h.next_piece) / sharing);
}

void Engine::on_hop_arrival(OpId op) {
  HopMember& h = hop_members_[hop_slot_[op]];
  ++h.received;
  advance_hop(hop_slot_[op], !h.working && h.received > 0);
}

// A piece is done: after the last the member's op ends; else its chunk
// leaves for the next member, over the link between their machines.
void Engine::end_hop_piece(OpId op) {
  Collective& c = collectives_[states_[op].index];
  const int32_t slot = hop_slot_[op];
  HopMember& h = hop_members_[slot];
  h.working = false;
  if (h.next_piece++ == 2 * (c.members - 1)) {
    finish(op);
    return;
  }
  const OpId to = collective_ops_[c.first_slot + (slot - c.first_slot + 1) % c.members];
  const bool crosses = machine_of_worker_[states_[op].worker] != machine_of_worker_[states_[to].worker];
  const LinkParams link = collective_link_for(cluster_, crosses);
  double bytes = c.hop_bytes;
  if (crosses) {
    const double taken = std::min(bytes, h.burst_left);
    h.burst_left -= taken;
    bytes -= taken;
  }
  const SimTime sent_ns =
      later_ns(std::max(now_ns_, h.link_free_ns), duration_ns(bytes * link.beta_s_per_byte, op), op);
  h.link_free_ns = sent_ns;
  push(later_ns(sent_ns, duration_ns(link.alpha_s, op), op), to, kHandedOff | (kHopArrival << 2));
  advance_hop(slot, false);
}

}  // namespace trainsim::des_detail
