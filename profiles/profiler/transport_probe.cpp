// measure_transport_cluster: ping-pong sweeps and ring hops over the
// workers' transport, the device probe on every worker at once (its
// hand-off on each in turn), whether every worker runs on this computer,
// and worker 0's assembly sent to the others.
#include "profiles/profiler/transport_probe.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "exec/devices.hpp"
#include "exec/interpreter.hpp"
#include "model/error.hpp"
#include "profiles/profiler/link_stream.hpp"
#include "profiles/profiler/sharing_probe.hpp"
#include "profiles/profiler/timing.hpp"
#include "profiles/profiler/wake_probe.hpp"

namespace trainsim {
namespace {

// Tags of the probe's messages: its own range, apart from the interpreter's.
constexpr int64_t kPhaseTag = 30001;
constexpr int64_t kClusterTag = 30003;
constexpr int64_t kDeviceTag = 30803;
constexpr int64_t kPingTag = 30005;  // + 2 per message size
constexpr int64_t kHopTag = 30901;
constexpr int64_t kComputerTag = 30903;
constexpr int64_t kStreamTag = 31001;  // + 0..4: the link streams' exchange
constexpr int64_t kSyncTag = 31201;

// Ping-pong between `from` (which times) and `to` over the sweep's sizes.
std::vector<ChannelSample> ping_pong(Transport& t, int self, int from, int to, const ClusterProbeOptions& o) {
  std::vector<ChannelSample> samples;
  int64_t k = 0;
  for (int64_t bytes = o.min_message_bytes; bytes <= o.max_message_bytes; bytes *= 4, ++k) {
    const int64_t tag = kPingTag + 2 * k;
    std::vector<float> buffer(static_cast<size_t>(std::max<int64_t>(1, bytes / 4)), 1.0f);
    std::vector<double> round_trip_s;
    for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
      const double start_s = now_s();
      if (self == from) {
        t.send(from, to, tag, std::vector<float>(buffer));
        buffer = t.recv(from, to, tag);
      } else {
        buffer = t.recv(to, from, tag);
        t.send(to, from, tag, std::vector<float>(buffer));
      }
      if (r >= o.warmups) round_trip_s.push_back(now_s() - start_s);
    }
    if (self == from) samples.push_back({static_cast<double>(buffer.size() * sizeof(float)), median_s(round_trip_s) / 2});
  }
  return samples;
}

// One ring hop within `members` (this worker's host), every member at once:
// send a chunk to the next, receive the previous one's, copy it into place.
double hop_bytes_per_s(Transport& t, int self, const std::vector<int>& members, int64_t bytes,
                       const ClusterProbeOptions& o) {
  const auto at = std::find(members.begin(), members.end(), self) - members.begin();
  const auto p = static_cast<std::ptrdiff_t>(members.size());
  const int next = members[static_cast<size_t>((at + 1) % p)], previous = members[static_cast<size_t>((at - 1 + p) % p)];
  std::vector<float> chunk(static_cast<size_t>(std::max<int64_t>(1, bytes / 4)), 1.0f);
  std::vector<double> samples_s;
  for (int64_t r = 0; r < o.warmups + o.pack_repeats; ++r) {
    t.barrier(self, members, kHopTag + 2);
    const double start_s = now_s();
    t.send(self, next, kHopTag, std::vector<float>(chunk));
    const std::vector<float> received = t.recv(self, previous, kHopTag);
    std::copy(received.begin(), received.end(), chunk.begin());
    if (r >= o.warmups) samples_s.push_back(now_s() - start_s);
  }
  return static_cast<double>(chunk.size() * sizeof(float)) / median_s(samples_s);
}

// The transport's barrier across every worker, back to back, each one's
// last arrival the previous one's release: seconds per barrier
// (collective.sync_s, the release after the last arrival).
double barrier_period_s(Transport& t, int self, const std::vector<int>& everyone, const ClusterProbeOptions& o) {
  for (int64_t r = 0; r < o.warmups; ++r) t.barrier(self, everyone, kSyncTag);
  const double start_s = now_s();
  for (int64_t r = 0; r < o.barrier_repeats; ++r) t.barrier(self, everyone, kSyncTag);
  return (now_s() - start_s) / static_cast<double>(std::max<int64_t>(1, o.barrier_repeats));
}

std::vector<float> text_as_floats(const std::string& text) {
  std::vector<float> out(text.size());
  std::transform(text.begin(), text.end(), out.begin(), [](char c) { return static_cast<float>(static_cast<unsigned char>(c)); });
  return out;
}

std::string floats_as_text(const std::vector<float>& values) {
  std::string out(values.size(), '\0');
  std::transform(values.begin(), values.end(), out.begin(), [](float v) { return static_cast<char>(static_cast<unsigned char>(v)); });
  return out;
}

// This computer's kernel time so far (system, interrupts, softirq), all
// cores, from /proc/stat; -1 where it cannot be read.
double computer_kernel_s() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return -1;
  return (system + irq + softirq) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Where the hosts are one computer (emulated hosts): the kernel's core time
// per byte crossing the links between them (Cluster::link_kernel_s_per_byte).
// Every host's first worker (`leaders`, worker 0 first) sends a blocking TCP
// stream of o.stream_bytes to the next host's while receiving the previous
// one's, as a ring's steps cross the links at once (link_stream.hpp), and
// worker 0 reads the computer's kernel time over the streams less the system
// time of the other workers, which wait meanwhile (yielding, in the
// transport). 0 where the hosts are several computers or a stream could not
// be made. Returned on worker 0.
double link_kernel_s_per_byte(Transport& t, int self, const std::vector<int>& leaders, const std::vector<int>& everyone,
                              const ClusterProbeOptions& o) {
  constexpr double kTimeoutS = 10;
  const auto at = static_cast<size_t>(std::find(leaders.begin(), leaders.end(), self) - leaders.begin());
  if (at == leaders.size()) {  // waits out the streams and tells worker 0 its system time meanwhile
    const double start_s = system_time_s(SystemTimeOf::kProcess);
    t.recv(self, 0, kStreamTag + 3);
    t.send(self, 0, kStreamTag + 4, {static_cast<float>(system_time_s(SystemTimeOf::kProcess) - start_s)});
    return 0;
  }
  const int next = leaders[(at + 1) % leaders.size()], previous = leaders[(at + leaders.size() - 1) % leaders.size()];
  std::optional<LinkStreamListener> listener;
  std::string offer = computer_id();
  try {
    listener.emplace();
    offer += " " + std::to_string(listener->port());
    for (const std::string& address : host_addresses()) offer += " " + address;
  } catch (const std::runtime_error&) {
  }
  t.send(self, previous, kStreamTag, text_as_floats(offer));
  std::istringstream theirs(floats_as_text(t.recv(self, next, kStreamTag)));
  std::string id;
  int port = 0;
  std::vector<std::string> addresses;
  theirs >> id >> port;
  for (std::string address; theirs >> address;) addresses.push_back(address);
  const bool go = !id.empty() && id == computer_id() && port > 0 && !addresses.empty();
  t.send(self, next, kStreamTag + 1, text_as_floats(go ? "go" : "skip"));
  const bool coming = floats_as_text(t.recv(self, previous, kStreamTag + 1)) == "go";
  const double start_s = computer_kernel_s();
  double received_s = -1;
  std::thread receiver([&] {
    if (coming && listener) received_s = listener->receive_sys_s(kTimeoutS);
  });
  const double sent_s = go ? send_link_stream_sys_s(addresses, port, o.stream_bytes, kTimeoutS) : -1;
  receiver.join();
  bool whole = sent_s >= 0 && received_s >= 0;
  if (self != 0) {
    t.send(self, 0, kStreamTag + 2, {whole ? 1.0f : 0.0f});
    return 0;
  }
  for (size_t l = 1; l < leaders.size(); ++l) whole = t.recv(0, leaders[l], kStreamTag + 2).at(0) > 0 && whole;
  double kernel_s = computer_kernel_s() - start_s;
  for (const int w : everyone) {
    if (std::find(leaders.begin(), leaders.end(), w) == leaders.end()) t.send(0, w, kStreamTag + 3, {1.0f});
  }
  for (const int w : everyone) {
    if (std::find(leaders.begin(), leaders.end(), w) == leaders.end()) kernel_s -= t.recv(0, w, kStreamTag + 4).at(0);
  }
  if (!whole || start_s < 0 || kernel_s <= 0) return 0;
  return kernel_s / (static_cast<double>(o.stream_bytes) * static_cast<double>(leaders.size()));
}

}  // namespace

Cluster measure_transport_cluster(Transport& t, int self, const std::vector<int>& host_of,
                                  const ClusterProbeOptions& o) {
  const int workers = t.workers();
  TRAINSIM_CHECK(static_cast<int>(host_of.size()) == workers && self >= 0 && self < workers,
                 "a host for every worker of the transport");
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  std::vector<std::vector<int>> on_host(static_cast<size_t>(hosts));
  for (int w = 0; w < workers; ++w) {
    TRAINSIM_CHECK(host_of[static_cast<size_t>(w)] >= 0, "hosts numbered from 0");
    on_host[static_cast<size_t>(host_of[static_cast<size_t>(w)])].push_back(w);
  }
  const size_t per_host = on_host.front().size();
  for (const auto& members : on_host) {
    if (members.size() != per_host) {
      throw InputError("mpirun", "placed " + std::to_string(on_host.front().size()) + " ranks on the first host and " +
                                     std::to_string(members.size()) + " on another",
                       "as many ranks on every host (a cluster's machines are alike)");
    }
  }
  std::vector<int> everyone(static_cast<size_t>(workers));
  std::iota(everyone.begin(), everyone.end(), 0);

  // Every worker's device at once.
  t.barrier(self, everyone, kPhaseTag);
  ClusterProbeOptions mine = o;  // the hand-off's threads where this rank's worker runs them
  mine.as_worker = self;
  mine.as_workers = workers;
  mine.together = [&] { t.barrier(self, everyone, kPhaseTag); };
  Cluster c = measure_cpu_cluster(1, mine);
  // The hand-off alone, each rank in turn while the others wait asleep:
  // where ranks share a computer's cores the simulator adds what the other
  // ranks' work on the core costs it (Cluster::shared_cores).
  for (int w = 0; w < workers; ++w) {
    t.barrier(self, everyone, kPhaseTag);
    if (self == w) c.device.handoff_s = measure_handoff_s(1, mine);
  }
  t.barrier(self, everyone, kPhaseTag);
  ChannelFit intra{}, inter{};
  if (per_host >= 2) {
    const int a = on_host[0][0], b = on_host[0][1];
    if (self == a || self == b) {
      const auto samples = ping_pong(t, self, a, b, o);
      if (self == a) intra = fit_channel(samples);
    }
  }
  t.barrier(self, everyone, kPhaseTag);
  if (hosts >= 2) {
    const int a = on_host[0][0], b = on_host[1][0];
    if (self == a || self == b) {
      const auto samples = ping_pong(t, self, a, b, o);
      if (self == a) inter = fit_channel(samples);
    }
  }
  t.barrier(self, everyone, kPhaseTag);
  double link_kernel = 0;
  if (hosts >= 2) {
    std::vector<int> leaders;
    for (const auto& members : on_host) leaders.push_back(members.front());
    TRAINSIM_CHECK(leaders.front() == 0, "hosts numbered from worker 0's");
    link_kernel = link_kernel_s_per_byte(t, self, leaders, everyone, o);
  }
  t.barrier(self, everyone, kPhaseTag);
  double hop = 0;
  if (per_host >= 2) {
    const int64_t chunk_bytes = std::max<int64_t>(o.pack_bytes / static_cast<int64_t>(per_host), 1 << 20);
    hop = hop_bytes_per_s(t, self, on_host[static_cast<size_t>(host_of[static_cast<size_t>(self)])], chunk_bytes, o);
  }
  t.barrier(self, everyone, kPhaseTag);
  const SharingRates sharing = measure_sharing_rates(t, self, o);
  t.barrier(self, everyone, kPhaseTag);
  const double sync_s = workers >= 2 ? barrier_period_s(t, self, everyone, o) : 0.0;
  t.barrier(self, everyone, kPhaseTag);

  // Each device's figures (compute, memory, hand-off, the host's copies and
  // sums, packing, codecs) as the median over the workers' probes: one
  // worker's probe that other ranks' probes held off its core moves none.
  if (self != 0) {
    t.send(self, 0, kComputerTag, text_as_floats(computer_id()));
    t.send(self, 0, kDeviceTag, text_as_floats(cluster_to_json(c).dump()));
    return cluster_from_json(nlohmann::json::parse(floats_as_text(t.recv(self, 0, kClusterTag))),
                             "the cluster worker 0 measured");
  }
  const std::string computer = computer_id();
  bool one_computer = !computer.empty();
  for (int w = 1; w < workers; ++w) one_computer = floats_as_text(t.recv(0, w, kComputerTag)) == computer && one_computer;
  std::vector<Cluster> devices{c};
  for (int w = 1; w < workers; ++w) {
    devices.push_back(cluster_from_json(nlohmann::json::parse(floats_as_text(t.recv(0, w, kDeviceTag))),
                                        "the device worker " + std::to_string(w) + " measured"));
  }
  c = median_cluster(devices);
  c.machines = hosts;
  c.devices_per_machine = static_cast<int64_t>(per_host);
  c.name = "cpu" + std::to_string(hosts) + "x" + std::to_string(per_host) + "-measured";
  // Every rank on this computer (emulated hosts, or ranks started on one
  // machine): its cores are the ranks'.
  if (one_computer) {
    c.shared_cores = usable_cores();
    c.link_kernel_s_per_byte = link_kernel;
  }
  // Compute and the AllReduce beside each other, as the run pins their
  // threads (sharing_probe.hpp). The simulator takes the links' kernel work
  // from the shared cores itself: the compute's rate is what is left
  // without it. The AllReduce's rate beside GEMMs that never pause is
  // reported, not used: the executor's compute comes in bursts (an
  // iteration's ops) between which its thread sleeps, and the collective
  // slows by far less (docs/simulator.md).
  std::string sharing_text;
  if (workers >= 2) {
    const double kernel = ring_kernel_share(c.link_kernel_s_per_byte, hosts, workers, static_cast<double>(o.pack_bytes),
                                            sharing.busy_s, c.shared_cores);
    c.device.compute_rate_while_communicating =
        std::clamp(sharing.compute / std::max(kMinSharingRate, 1 - kernel), kMinSharingRate, 1.0);
    std::ostringstream text;
    text.precision(2);
    text << "; compute beside a ring AllReduce of " << o.pack_bytes << " B on every worker at "
         << c.device.compute_rate_while_communicating
         << " of its rate, and the AllReduce beside GEMMs that never pause at " << sharing.collective
         << " of its own (not used)";
    sharing_text = text.str();
  }
  if (per_host < 2) intra = inter;
  if (hosts < 2) inter = intra;
  // The transport's sends leave every rank alike (one launch's settings).
  const auto buffer = static_cast<double>(t.send_buffer_bytes());
  c.intra_link = {intra.bandwidth_bytes_per_s, intra.latency_s, buffer, intra.burst_bytes};
  c.inter_link = {inter.bandwidth_bytes_per_s, inter.latency_s, buffer, inter.burst_bytes};
  c.collective.hop_bytes_per_s = hop;
  if (workers >= 2) c.collective.sync_s = sync_s;  // across the ranks, not one rank's threads
  c.description = "measured across " + std::to_string(workers) + " workers (" + std::to_string(hosts) + " hosts of " +
                  std::to_string(per_host) + ") over their transport: ping-pong " +
                  std::to_string(o.min_message_bytes) + " B.." + std::to_string(o.max_message_bytes) +
                  " B within and between hosts (bandwidth: least-squares slope of the large ones; latency: the "
                  "smallest's one-way time; token bucket: the bytes crossing at once where the large ones' line passes "
                  "below the latency), ring hops within each host at once, barriers across every worker back to back; "
                  "each device probed with every worker busy (" +
                  c.device.name + ")" +
                  (c.link_kernel_s_per_byte > 0 ? "; the links' kernel time: this computer's over TCP streams "
                                                  "from every host to the next at once"
                                                : "") +
                  sharing_text;
  validate_cluster(c, "measured cluster " + c.name);
  const std::string text = cluster_to_json(c).dump();
  for (int w = 1; w < workers; ++w) t.send(0, w, kClusterTag, text_as_floats(text));
  return c;
}

}  // namespace trainsim
