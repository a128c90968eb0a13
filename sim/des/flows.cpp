// Transfers as flows over shared ports (see flows.hpp): the port layout of a
// cluster, and the progress accounting that recomputes rates whenever a flow
// joins or leaves a port.
#include "sim/des/flows.hpp"

#include <algorithm>
#include <limits>
#include <cmath>

#include "model/error.hpp"
#include "sim/des/clock.hpp"

namespace trainsim {
namespace {

constexpr uint32_t kVersionMask = kFlowPostsBit - 1;  // versions count modulo 2^29: the engine packs them and
                                                      // the posts bit in 30 bits

// Port index ranges, in this order: per device intra egress, intra ingress,
// host egress (device to host), host ingress; per machine NIC egress, NIC
// ingress, host reduction.
enum PortRange { kIntraEgress, kIntraIngress, kHostEgress, kHostIngress, kNicEgress, kNicIngress, kHostReduce };

}  // namespace

FlowNetwork::FlowNetwork(const Cluster& cluster, std::string where)
    : cluster_(cluster),
      where_(std::move(where)),
      devices_(static_cast<int32_t>(device_count(cluster))),
      machines_(static_cast<int32_t>(cluster.machines)) {
  const double intra = cluster.intra_link.bandwidth_bytes_per_s / kNsPerS;
  const double inter = cluster.inter_link.bandwidth_bytes_per_s / kNsPerS;
  const double host = cluster.host.link_bandwidth_bytes_per_s / kNsPerS;
  const double reduce = cluster.host.reduce_bytes_per_s / kNsPerS;
  for (double c : {intra, intra, host, host}) capacity_bytes_per_ns_.insert(capacity_bytes_per_ns_.end(), devices_, c);
  for (double c : {inter, inter, reduce}) capacity_bytes_per_ns_.insert(capacity_bytes_per_ns_.end(), machines_, c);
  active_.assign(capacity_bytes_per_ns_.size(), {});
  share_bytes_per_ns_.assign(capacity_bytes_per_ns_.size(), 0.0);
  const double intra_burst = cluster.intra_link.burst_bytes, inter_burst = cluster.inter_link.burst_bytes;
  for (double b : {intra_burst, intra_burst, 0.0, 0.0}) burst_bytes_.insert(burst_bytes_.end(), devices_, b);
  for (double b : {inter_burst, inter_burst, 0.0}) burst_bytes_.insert(burst_bytes_.end(), machines_, b);
  credit_bytes_ = burst_bytes_;  // full at the start
  idle_since_ns_.assign(capacity_bytes_per_ns_.size(), 0);
  held_.assign(capacity_bytes_per_ns_.size(), 0);
  reserved_.assign(capacity_bytes_per_ns_.size(), 0.0);
  machine_of_device_.resize(devices_);
  for (int32_t d = 0; d < devices_; ++d) machine_of_device_[d] = static_cast<int32_t>(d / cluster.devices_per_machine);
  intra_latency_ns_ = duration_ns(cluster.intra_link.latency_s, -1);
  inter_latency_ns_ = duration_ns(cluster.inter_link.latency_s, -1);
  host_latency_ns_ = duration_ns(cluster.host.link_latency_s, -1);
}

int32_t FlowNetwork::device_port(int range, int32_t device) const { return range * devices_ + device; }

int32_t FlowNetwork::machine_port(int range, int32_t machine) const {
  return 4 * devices_ + (range - kNicEgress) * machines_ + machine;
}

// A finished flow's slot keeps its version (bumped), so a completion still
// queued for it never matches the next flow in the slot.
int32_t FlowNetwork::add_flow(OpId op, double bytes, SimTime latency_ns) {
  int32_t f = 0;
  if (free_slots_.empty()) {
    f = static_cast<int32_t>(flows_.size());
    flows_.emplace_back();
    stamp_of_flow_.push_back(0);
  } else {
    f = free_slots_.back();
    free_slots_.pop_back();
  }
  Flow& flow = flows_[f];  // join sets its progress and rate
  flow.op = op;
  flow.bytes = bytes;
  flow.latency_ns = latency_ns;
  flow.port_count = 0;
  flow.buffer_bytes = 0;
  flow.posting = false;
  flow.connection = -1;
  flow.waiting = false;
  return f;
}

void FlowNetwork::free_slot(int32_t f) {
  flows_[f].version = (flows_[f].version + 1) & kVersionMask;
  free_slots_.push_back(f);
}

void FlowNetwork::add_port(int32_t f, int32_t port) {
  if (!(capacity_bytes_per_ns_[port] > 0)) {
    throw InputError("cluster " + cluster_.name, "a link or host throughput the " + where_ + " uses is 0",
                     "positive link bandwidths and host reduction throughput");
  }
  Flow& flow = flows_[f];
  flow.ports[flow.port_count++] = port;
}

int32_t FlowNetwork::add_send(OpId op, int32_t from_device, int32_t to_device, double bytes) {
  const int32_t from_machine = machine_of_device_[from_device];
  const int32_t to_machine = machine_of_device_[to_device];
  const bool crosses = from_machine != to_machine;
  const int32_t f = add_flow(op, bytes, 0);
  add_port(f, device_port(kIntraEgress, from_device));
  add_port(f, device_port(kIntraIngress, to_device));
  if (crosses) {
    add_port(f, machine_port(kNicEgress, from_machine));
    add_port(f, machine_port(kNicIngress, to_machine));
  }
  Flow& flow = flows_[f];
  flow.buffer_bytes = (crosses ? cluster_.inter_link : cluster_.intra_link).send_buffer_bytes;
  flow.posting = flow.buffer_bytes > 0;
  if (flow.posting) flow.connection = static_cast<int64_t>(from_device) * devices_ + to_device;
  return f;
}

int32_t FlowNetwork::add_copy(OpId op, int32_t device, bool to_host, double bytes) {
  const int32_t f = add_flow(op, bytes, host_latency_ns_);
  // Virtual workers of one physical device (Cluster::shared_devices) share its host link.
  const auto linked = static_cast<int32_t>(cluster_.shared_devices > 0 ? physical_device_of(cluster_, device) : device);
  add_port(f, device_port(to_host ? kHostEgress : kHostIngress, linked));
  return f;
}

int32_t FlowNetwork::add_host_accumulate(OpId op, int32_t machine, double bytes) {
  const int32_t f = add_flow(op, bytes, 0);
  add_port(f, machine_port(kHostReduce, machine));
  return f;
}

bool FlowNetwork::join(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  Flow& flow = flows_[f];
  if (!(flow.bytes > 0)) {
    free_slot(f);
    return false;
  }
  flow.remaining_bytes = flow.bytes;
  flow.updated_ns = now_ns;
  flow.rate_bytes_per_ns = 0;
  if (flow.connection >= 0) {
    std::deque<int32_t>& queue = connections_[flow.connection];
    queue.push_back(f);
    if (queue.size() > 1) {  // behind another message of its connection: it waits, and may post
      flow.waiting = true;
      schedule_post(f, now_ns, schedule);
      return true;
    }
  }
  start_moving(f, now_ns, schedule);
  return true;
}

// A port's bucket refills with the bandwidth nothing uses: all of it while
// no flow moves through it, what its holding collectives leave while they
// alone hold it (a tbf's tokens accrue at its rate; the bytes that cross
// take theirs), none while flows move (they take the rest).
void FlowNetwork::bank(int32_t port, SimTime now_ns) {
  if (burst_bytes_[port] > 0 && active_[port].empty()) {
    const double unused = held_[port] > 0 ? std::max(0.0, 1.0 - reserved_[port]) : 1.0;
    const double refill = capacity_bytes_per_ns_[port] * unused * static_cast<double>(now_ns - idle_since_ns_[port]);
    credit_bytes_[port] = std::min(burst_bytes_[port], credit_bytes_[port] + refill);
  }
  idle_since_ns_[port] = now_ns;
}

double FlowNetwork::take_burst(const Flow& flow, SimTime now_ns) {
  double burst = flow.remaining_bytes;
  bool bucketed = false;
  double slowest = std::numeric_limits<double>::infinity();
  for (int32_t p = 0; p < flow.port_count; ++p) slowest = std::min(slowest, capacity_bytes_per_ns_[flow.ports[p]]);
  bool slowest_unbucketed = false;  // then that port carries the bytes at its bandwidth, whatever the others hold
  for (int32_t p = 0; p < flow.port_count; ++p) {
    const int32_t port = flow.ports[p];
    if (!(burst_bytes_[port] > 0)) {
      slowest_unbucketed = slowest_unbucketed || capacity_bytes_per_ns_[port] <= slowest;
      continue;
    }
    bucketed = true;
    bank(port, now_ns);
    burst = std::min(burst, credit_bytes_[port]);
  }
  if (!bucketed || slowest_unbucketed) return 0;
  for (int32_t p = 0; p < flow.port_count; ++p) {
    if (burst_bytes_[flow.ports[p]] > 0) credit_bytes_[flow.ports[p]] -= burst;
  }
  return burst;
}

void FlowNetwork::start_moving(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  Flow& flow = flows_[f];
  flow.waiting = false;
  flow.updated_ns = now_ns;
  flow.remaining_bytes -= take_burst(flow, now_ns);
  for (int32_t p = 0; p < flow.port_count; ++p) {
    const int32_t port = flow.ports[p];
    active_[port].push_back(f);
    update_share(port);
  }
  reshare(f, now_ns, schedule);  // its rate changed from 0: its completion and post are scheduled
}

void FlowNetwork::leave(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  const Flow& flow = flows_[f];
  for (int32_t p = 0; p < flow.port_count; ++p) {
    std::vector<int32_t>& on_port = active_[flow.ports[p]];
    const auto it = std::find(on_port.begin(), on_port.end(), f);
    TRAINSIM_CHECK(it != on_port.end(), "a finished flow was not on its port");
    bank(flow.ports[p], now_ns);  // nothing while it moved: its bucket refills from now, if it was the last
    *it = on_port.back();
    on_port.pop_back();
    update_share(flow.ports[p]);
  }
  reshare(f, now_ns, schedule);
  free_slot(f);
  if (flow.connection < 0) return;
  const auto it = connections_.find(flow.connection);
  TRAINSIM_CHECK(it != connections_.end() && !it->second.empty() && it->second.front() == f,
                 "a finished send was not the first of its connection");
  it->second.pop_front();
  if (it->second.empty()) {
    connections_.erase(it);
    return;
  }
  start_moving(it->second.front(), now_ns, schedule);  // the next message of the connection
}

// The collectives holding the port take their reserved share of it; its
// flows share the rest, and never less than they would beside the
// collectives as equal streams.
void FlowNetwork::update_share(int32_t port) {
  const auto flows = static_cast<double>(active_[port].size());
  if (!(flows > 0)) {
    share_bytes_per_ns_[port] = 0.0;
    return;
  }
  const double left = std::max(1.0 - reserved_[port], flows / (flows + static_cast<double>(held_[port])));
  share_bytes_per_ns_[port] = capacity_bytes_per_ns_[port] * left / flows;
}

void FlowNetwork::reshare(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  const Flow& changed = flows_[f];
  reshare_ports(changed.ports.data(), changed.port_count, now_ns, schedule);
}

// The flows on `ports` see a new count there: bring each one's progress up
// to now at its old rate, give it its new rate, and reschedule its
// completion if the rate changed.
void FlowNetwork::reshare_ports(const int32_t* ports, int32_t count, SimTime now_ns,
                                std::vector<FlowCompletion>& schedule) {
  ++stamp_;
  for (int32_t p = 0; p < count; ++p) {
    for (int32_t g : active_[ports[p]]) {
      if (stamp_of_flow_[g] == stamp_) continue;
      stamp_of_flow_[g] = stamp_;
      Flow& flow = flows_[g];
      double rate = share_bytes_per_ns_[flow.ports[0]];
      for (int32_t q = 1; q < flow.port_count; ++q) rate = std::min(rate, share_bytes_per_ns_[flow.ports[q]]);
      if (rate == flow.rate_bytes_per_ns) continue;
      const double moved_bytes = flow.rate_bytes_per_ns * static_cast<double>(now_ns - flow.updated_ns);
      flow.remaining_bytes = std::max(0.0, flow.remaining_bytes - moved_bytes);
      flow.updated_ns = now_ns;
      flow.rate_bytes_per_ns = rate;
      flow.version = (flow.version + 1) & kVersionMask;
      const SimTime left_ns = to_clock_ns(round_ns(flow.remaining_bytes / rate), flow.op);
      schedule.push_back({g, later_ns(now_ns, left_ns, flow.op), flow.version});
      if (flow.connection >= 0) schedule_connection_posts(flow.connection, now_ns, schedule);
    }
  }
}

double FlowNetwork::remaining_at(const Flow& flow, SimTime now_ns) const {
  return std::max(0.0, flow.remaining_bytes - flow.rate_bytes_per_ns * static_cast<double>(now_ns - flow.updated_ns));
}

void FlowNetwork::schedule_connection_posts(int64_t connection, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  for (const int32_t f : connections_.at(connection)) schedule_post(f, now_ns, schedule);
}

void FlowNetwork::schedule_post(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule) {
  Flow& flow = flows_[f];
  if (!flow.posting) return;
  const std::deque<int32_t>& queue = connections_.at(flow.connection);
  const Flow& head = flows_[queue.front()];
  double queued_bytes = 0;  // the connection's bytes to move up to and including f's
  for (const int32_t g : queue) {
    queued_bytes += g == queue.front() ? remaining_at(head, now_ns) : flows_[g].remaining_bytes;
    if (g == f) break;
  }
  const double over_bytes = std::max(0.0, queued_bytes - flow.buffer_bytes);  // 0: it fits, posts now
  if (over_bytes > 0 && !(over_bytes <= remaining_at(head, now_ns) && head.rate_bytes_per_ns > 0)) {
    return;  // not while the head moves: scheduled again when the next message starts
  }
  if (flow.waiting) flow.version = (flow.version + 1) & kVersionMask;  // its earlier post is stale
  const SimTime until_ns =
      over_bytes > 0 ? to_clock_ns(round_ns(over_bytes / head.rate_bytes_per_ns), flow.op) : SimTime{0};
  schedule.push_back({f, later_ns(now_ns, until_ns, flow.op), flow.version, true});
}

double FlowNetwork::crossing_bytes_per_ns() const {
  double total = 0;
  for (int32_t m = 0; m < machines_; ++m) {
    for (const int32_t f : active_[machine_port(kNicEgress, m)]) total += flows_[f].rate_bytes_per_ns;
  }
  return total;
}

void FlowNetwork::reserve_nics(const std::vector<int32_t>& machines, double share, SimTime now_ns,
                               std::vector<FlowCompletion>& schedule) {
  nic_ports_.clear();
  for (const int32_t m : machines) {
    for (const int32_t port : {machine_port(kNicEgress, m), machine_port(kNicIngress, m)}) {
      bank(port, now_ns);  // at the share it had until now
      reserved_[port] = held_[port] > 0 ? std::max(0.0, reserved_[port] + share) : 0.0;
      update_share(port);
      nic_ports_.push_back(port);
    }
  }
  reshare_ports(nic_ports_.data(), static_cast<int32_t>(nic_ports_.size()), now_ns, schedule);
}

double FlowNetwork::nic_load(const std::vector<int32_t>& machines) const {
  double most = 0;
  for (const int32_t m : machines) {
    for (const int32_t port : {machine_port(kNicEgress, m), machine_port(kNicIngress, m)}) {
      most = std::max(most, reserved_[port]);
    }
  }
  return most;
}

double FlowNetwork::hold_nics(const std::vector<int32_t>& machines, double bytes_per_link, SimTime now_ns) {
  double burst = bytes_per_link;
  bool bucketed = false;
  for (const int32_t m : machines) {
    for (const int32_t port : {machine_port(kNicEgress, m), machine_port(kNicIngress, m)}) {
      bank(port, now_ns);
      ++held_[port];
      if (!(burst_bytes_[port] > 0)) continue;
      burst = std::min(burst, credit_bytes_[port]);
      bucketed = true;
    }
  }
  if (!bucketed) return 0;
  burst = std::max(0.0, burst);
  for (const int32_t m : machines) {
    for (const int32_t port : {machine_port(kNicEgress, m), machine_port(kNicIngress, m)}) {
      if (burst_bytes_[port] > 0) credit_bytes_[port] -= burst;
    }
  }
  return burst;
}

void FlowNetwork::release_nics(const std::vector<int32_t>& machines, double share, SimTime now_ns,
                               std::vector<FlowCompletion>& schedule) {
  for (const int32_t m : machines) {
    for (const int32_t port : {machine_port(kNicEgress, m), machine_port(kNicIngress, m)}) {
      bank(port, now_ns);
      --held_[port];
    }
  }
  reserve_nics(machines, -share, now_ns, schedule);
}

}  // namespace trainsim
