// Inside sim/des: transfers as flows over shared ports. A copy waits its
// latency, then moves its bytes at the minimum over its ports of the port's
// capacity divided by the flows active on it. That is equal sharing per port,
// not full max-min fairness: bandwidth a flow cannot use because another of
// its ports is busier is not handed to the other flows of the port.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiles/cluster.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {

// A link's token bucket (LinkSpec::burst_bytes): a flow that starts moving
// takes, at once, as many of its bytes as every bucketed port on its path
// holds (a path without one takes none); a port's bucket refills, up to the
// depth, with the bandwidth nothing uses: all of it while no flow moves
// through it, what the collectives holding it leave while they alone do.

// A flow's predicted completion, or (posts) the time a send's flow has only
// its send buffer's bytes left. A later reschedule of the same flow bumps its
// version, so an older completion is stale. Versions count modulo 2^29; the
// engine carries `posts` as kFlowPostsBit of the version.
struct FlowCompletion {
  int32_t flow = 0;
  SimTime time_ns = 0;
  uint32_t version = 0;
  bool posts = false;
};
inline constexpr uint32_t kFlowPostsBit = 1u << 29;

class FlowNetwork {
 public:
  // Ports: per device one intra-machine egress and ingress (intra_link
  // bandwidth) and one host-link port per direction (host link bandwidth); per
  // machine one NIC egress and ingress (inter_link bandwidth) and the host
  // reduction (host.reduce_bytes_per_s). `where` names the plan in errors.
  FlowNetwork(const Cluster& cluster, std::string where);

  // A flow for a transfer op as it starts (its latency begins); each returns
  // the flow's index, a slot that is reused once the flow has finished, so
  // the network holds the flows in flight, not one per transfer of the run.
  // A send crossing machines also uses both machines' NICs. A send moves its
  // bytes at once: its link's latency (send_latency_ns) is in flight after
  // it, not on its stream. Where its link has a send buffer
  // (LinkSpec::send_buffer_bytes), the sends from one device to another go
  // one after another, as over one TCP connection, and each also posts once
  // no more than the buffer's bytes of its connection, its own included, are
  // left to move (at once where they fit). Copies wait the host-link latency
  // first; host accumulation none.
  int32_t add_send(OpId op, int32_t from_device, int32_t to_device, double bytes);
  int32_t add_copy(OpId op, int32_t device, bool to_host, double bytes);
  int32_t add_host_accumulate(OpId op, int32_t machine, double bytes);

  SimTime latency_ns(int32_t f) const { return flows_[f].latency_ns; }
  // The latency of the link from one device to another: intra- or inter-link.
  SimTime send_latency_ns(int32_t from_device, int32_t to_device) const {
    return machine_of_device_[from_device] == machine_of_device_[to_device] ? intra_latency_ns_ : inter_latency_ns_;
  }
  OpId op(int32_t f) const { return flows_[f].op; }
  bool is_current(int32_t f, uint32_t version) const { return flows_[f].version == version; }
  // Flow f's post has come: no more are scheduled.
  void posted(int32_t f) { flows_[f].posting = false; }

  // Flow f's latency has passed at now_ns: it joins its ports. Returns false
  // when it has no bytes to move (it is done now, and its slot free); else
  // appends to `schedule` the completions of every flow whose rate changed,
  // f included.
  bool join(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  // Flow f has finished: it leaves its ports, the others speed up, and its slot is free.
  void leave(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule);

  // The bytes per nanosecond moving between machines now: the rates of the
  // flows moving through the NICs' egress ports.
  double crossing_bytes_per_ns() const;

  // A collective across `machines` (sorted, distinct) starts: it holds their
  // NICs until release_nics, their buckets refilling meanwhile with the
  // share the collectives leave unused. Returns the bytes each of its links sends at once, the
  // least any of the NICs' buckets holds and at most `bytes_per_link`, taken
  // from every one of them (0 without buckets).
  double hold_nics(const std::vector<int32_t>& machines, double bytes_per_link, SimTime now_ns);
  // The most the holding collectives take together of any of `machines`'
  // NICs (the sum of their reserve_nics shares on it).
  double nic_load(const std::vector<int32_t>& machines) const;
  // A holding collective takes `share` (a fraction of their bandwidth) of
  // each of those NICs' ports from their flows: they share the rest, and
  // never less than an equal share beside the collectives holding the port,
  // as TCP streams would get. `schedule` gets the completions of the flows
  // whose rate changed. release_nics gives the share back.
  void reserve_nics(const std::vector<int32_t>& machines, double share, SimTime now_ns,
                    std::vector<FlowCompletion>& schedule);
  void release_nics(const std::vector<int32_t>& machines, double share, SimTime now_ns,
                    std::vector<FlowCompletion>& schedule);

 private:
  struct Flow {
    double bytes = 0;
    double remaining_bytes = 0;
    double rate_bytes_per_ns = 0;
    SimTime updated_ns = 0;  // when remaining_bytes was last brought up to date
    SimTime latency_ns = 0;
    uint32_t version = 0;
    int32_t port_count = 0;
    std::array<int32_t, 4> ports{};
    OpId op = -1;
    double buffer_bytes = 0;  // a send's link's send buffer
    bool posting = false;     // its post is still to come
    int64_t connection = -1;  // a send with a buffer: its connection (from device · devices + to device)
    bool waiting = false;     // ... behind another message of it, off its ports
  };

  int32_t device_port(int range, int32_t device) const;    // range: one of flows.cpp's PortRange
  int32_t machine_port(int range, int32_t machine) const;
  int32_t add_flow(OpId op, double bytes, SimTime latency_ns);
  void add_port(int32_t f, int32_t port);
  void free_slot(int32_t f);
  void update_share(int32_t port);  // after its active flows changed
  void reshare(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  void reshare_ports(const int32_t* ports, int32_t count, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  // The flow joins its ports: it takes its burst and moves bytes from now.
  void start_moving(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  // Brings the port's bucket up to now at the bandwidth unused since the last
  // change; call before the port's flows, holds or share change.
  void bank(int32_t port, SimTime now_ns);
  // Flow f's bytes that cross at once from the buckets of its ports, taken from them.
  double take_burst(const Flow& flow, SimTime now_ns);
  // A posting flow's post: when the bytes of its connection up to and
  // including it, moving at the head's rate, are down to its buffer.
  void schedule_post(int32_t f, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  // Every posting flow of a connection, after its head's rate changed.
  void schedule_connection_posts(int64_t connection, SimTime now_ns, std::vector<FlowCompletion>& schedule);
  // Flow f's bytes still to move at now_ns.
  double remaining_at(const Flow& flow, SimTime now_ns) const;

  const Cluster& cluster_;
  const std::string where_;
  int32_t devices_ = 0;
  int32_t machines_ = 0;
  std::vector<Flow> flows_;
  std::vector<double> capacity_bytes_per_ns_;  // per port
  std::vector<std::vector<int32_t>> active_;   // per port: the flows moving bytes through it
  std::vector<double> share_bytes_per_ns_;     // per port: its capacity over its active flows
  std::vector<double> burst_bytes_;            // per port: its token bucket's depth (0: none)
  std::vector<double> credit_bytes_;           // per port: its bucket's bytes as of idle_since_ns_
  std::vector<SimTime> idle_since_ns_;         // per port: when its bucket was last brought up to date (bank)
  std::vector<int32_t> held_;                  // per port: collectives holding it (hold_nics)
  std::vector<double> reserved_;               // per port: the share its holding collectives take (reserve_nics)
  std::vector<int32_t> nic_ports_;             // scratch: the ports reserve_nics reshares
  std::vector<uint32_t> stamp_of_flow_;        // marks flows already reshared in one pass
  uint32_t stamp_ = 0;
  std::vector<int32_t> free_slots_;            // flows_ entries whose flow has finished
  std::unordered_map<int64_t, std::deque<int32_t>> connections_;  // posting sends in flight, in order, by connection
  std::vector<int32_t> machine_of_device_;
  SimTime intra_latency_ns_ = 0;  // the links' latencies on the clock
  SimTime inter_latency_ns_ = 0;
  SimTime host_latency_ns_ = 0;
};

}  // namespace trainsim
