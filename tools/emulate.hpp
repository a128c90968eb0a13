// Emulated clusters on one machine (`trainsim cluster emulate`): H hosts as
// network namespaces, each joined to a shared switch (a Linux bridge) by a
// veth pair whose two ends are shaped to the link rate by `tc tbf`, and
// what mpirun needs to start ranks inside them (a hostfile of the hosts, an
// rsh agent that runs a command with `ip netns exec`, the subnet for Open
// MPI's TCP transports). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// The emulated links' MTU unless asked otherwise: jumbo frames, as cluster
// networks use. tbf cuts a segmentation-offloaded packet larger than its
// bucket into MTU-sized ones in software, work a real NIC does in hardware;
// at 1500 bytes that work took more than half of two cores for four hosts
// at 200 Mbit/s (docs/results.md).
constexpr int kEmulatedMtu = 9000;

struct EmulatedCluster {
  std::string name;          // [a-z0-9], 1-6 characters: interface names stay under 16
  int hosts = 0;
  int workers_per_host = 1;  // the hostfile's slots per host
  std::string link;          // tc's rate, e.g. "1gbit", "200mbit"
  int mtu = kEmulatedMtu;    // of every host's link and the switch
  int64_t burst_bytes = 0;   // each link's tbf bucket
  std::string subnet;        // e.g. "10.77.42.0/24"; the bridge is .1, host i .(10 + i)
  std::string folder;        // where the hostfile, the agent and state.json live
  std::vector<std::string> namespaces;  // one per host, "<name>-h<i>"

  std::string hostfile() const { return folder + "/hostfile"; }
  std::string agent() const { return folder + "/rsh-agent"; }
  std::string host_address(int host) const;
  // The mpirun options that start ranks on these hosts.
  std::string mpirun_options() const;
};

// The TCP socket send buffer of the cluster's ranks for a link of tc's rate
// `link` (mpirun_options' btl_tcp_sndbuf).
int64_t emulated_socket_buffer_bytes(const std::string& link);

// The folder emulated clusters keep their files in (one folder per name).
std::string emulate_root();

// The tbf bucket of a link of tc's rate `link` unless asked otherwise: what
// the link sends in 1 ms, 16 KB at least.
int64_t emulated_burst_bytes(const std::string& link);

// Builds the cluster; any one that was there under the name is removed first.
// `burst_bytes` 0: emulated_burst_bytes. InputError naming the option for bad
// input, or saying which command failed and why (no privilege: "needs root
// ..."); what was made is removed then.
EmulatedCluster emulate_up(const std::string& name, int hosts, int workers_per_host, const std::string& link,
                           int mtu = kEmulatedMtu, int64_t burst_bytes = 0);

// Removes everything the cluster of `name` made; true if there was something.
bool emulate_down(const std::string& name);

// The clusters made and not removed, as their state files say; `alive` per
// cluster: whether all its namespaces and its bridge still exist.
struct EmulatedStatus {
  EmulatedCluster cluster;
  bool alive = false;
};
std::vector<EmulatedStatus> emulate_status();

// Why this process cannot make network namespaces, or "" if it can (a probe
// namespace made and removed).
std::string emulate_unavailable_reason();

}  // namespace trainsim
