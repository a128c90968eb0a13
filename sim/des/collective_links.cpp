// Collectives across machines and their NICs: what the NICs' buckets let
// across at once as one starts, the share of the NICs it takes from the
// flows there, and the NICs' bandwidth shared among the collectives that
// hold them at once (docs/simulator.md).
#include <algorithm>
#include <cmath>

#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {

// A collective across machines starts: its links' first bytes cross at once
// from the NICs' buckets (returned), and the rest take their share of the
// NICs from the flows there over the time it then has left.
double Engine::take_links(Collective& c) {
  const std::vector<int32_t>& machines = machines_of(c);
  const double burst = flows_.hold_nics(machines, c.link_bytes, now_ns_);
  const double left_ns = std::max(0.0, static_cast<double>(c.duration_ns) - burst * c.link_ns_per_byte);
  const double link_ns = std::max(0.0, c.link_bytes - burst) * c.link_ns_per_byte;
  c.link_share = left_ns > 0 ? std::min(1.0, link_ns / left_ns) : 0.0;
  flows_.reserve_nics(machines, c.link_share, now_ns_, completions_);
  push_completions();
  return burst;
}

void Engine::join_links(Collective& c) {
  crossing_.push_back(static_cast<int32_t>(&c - collectives_.data()));
  reshare_links();
}

void Engine::leave_links(Collective& c) {
  const auto index = static_cast<int32_t>(&c - collectives_.data());
  crossing_.erase(std::remove(crossing_.begin(), crossing_.end(), index), crossing_.end());
  reshare_links();
}

// Collectives holding the same NIC share its bandwidth: where the shares
// they take of a NIC (link_share) add up past 1, each of them runs at 1 over
// that sum, the most crowded of its NICs pacing it; its progress at the old
// rate is banked first.
void Engine::reshare_links() {
  for (const int32_t index : crossing_) {
    Collective& c = collectives_[static_cast<size_t>(index)];
    const double load = flows_.nic_load(machines_of(c));
    const double rate = load > 1 ? 1 / load : 1.0;
    if (rate == c.nic_rate) continue;
    c.remaining_ns = std::max(0.0, c.remaining_ns - collective_rate(c) * static_cast<double>(now_ns_ - c.since_ns));
    c.since_ns = now_ns_;
    c.nic_rate = rate;
    reschedule_collective(c);
  }
}

}  // namespace trainsim::des_detail
