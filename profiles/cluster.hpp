// Clusters (`trainsim.cluster/1`, docs/formats.md): identical devices on one or
// more machines, the links between them and the host. Presets describe the
// seeds' testbeds and modern machines (presets.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trainsim {

// Momentum SGD reads weights, gradients and momentum and writes weights and
// momentum: the cost models' optimizer update is 5 passes over the
// parameters at DeviceSpec::memory_bytes_per_s (sim/cost/common.hpp), and
// the CPU probe measures that rate as the executor's update achieves it.
inline constexpr double kUpdatePassesPerParamByte = 5.0;

struct DeviceSpec {
  std::string name;               // "Tesla P40"
  std::string kind = "gpu";       // "gpu" or "cpu"
  double memory_bytes = 0;        // 24e9
  double peak_flops_per_s = 0;    // fp32 (or the profile's dtype) peak, 11.8e12
  double memory_bytes_per_s = 0;  // device memory bandwidth, 346e9
  // Rate at which a worker's compute runs while its communication (a
  // collective, a host copy or accumulation) is in flight, relative to
  // running alone: 1 where copy engines move the bytes (GPUs), below 1 where
  // the same cores do both (CPU threads on fewer spare cores). Optional in
  // the file (default 1); the CPU probe derives it from the core count and
  // the executor's two threads per worker (docs/simulator.md).
  double compute_rate_while_communicating = 1;
  // Rate at which the part of a collective the workers' cores do (its
  // reductions, packing and codec; all of it within a machine) runs while
  // any member's worker computes, relative to running with every member
  // idle (the slowest member paces a ring). Optional in the file: 0 (the
  // default) takes compute_rate_while_communicating (docs/simulator.md).
  double collective_rate_while_computing = 0;
  // Time a worker's compute stream loses each time one of its compute ops
  // hands work to another of its streams (a send, a collective, a copy the
  // op releases): the stream's next op starts this long after the op ends,
  // while the released op starts at once. On CPU threads sharing a core it is
  // the switch to the communication thread and back; optional in the file
  // (default 0, as for an asynchronous launch).
  double handoff_s = 0;
  // With Cluster::shared_devices: the rate at which each of the workers of
  // one physical device computes while all of them compute at once,
  // relative to computing alone. With n of its W workers computing, each
  // runs at 1 / (1 + (n − 1)(1/r − 1)/(W − 1)): r = 1/W is processor
  // sharing (1/n, kernels that fill the device), r = 1 workers that never
  // slow each other (kernels too small to fill it). Optional in the file:
  // 0 (the default) takes 1/W. `profile --device cuda:GxW --cluster-out`
  // measures it on the profile's own model (docs/simulator.md).
  double compute_rate_while_shared = 0;
  // The host's time per compute op where the device runs an op's work after
  // the host has queued it (a GPU): queuing its kernels and the executor's
  // own work around them (lending the pass a network, loading weights,
  // events between streams, the update's waits). A forward (or recompute),
  // backward or update over n layers holds its worker's host for fixed_s +
  // n · per_layer_s of its kind and ends when both that and its work are
  // done. Optional in the file (under "host_per_op"): absent, 0 (a CPU's,
  // whose work is the host's). `profile --device cuda --cluster-out`
  // measures it through the executor (profiles/profiler/host_per_op.hpp).
  struct HostTime {
    double fixed_s = 0;
    double per_layer_s = 0;
    double seconds(int64_t layers) const { return fixed_s + static_cast<double>(layers) * per_layer_s; }
  };
  struct HostPerOp {
    HostTime forward;
    HostTime backward;
    HostTime update;
    bool any() const {
      return forward.fixed_s > 0 || forward.per_layer_s > 0 || backward.fixed_s > 0 || backward.per_layer_s > 0 ||
             update.fixed_s > 0 || update.per_layer_s > 0;
    }
  };
  HostPerOp host_per_op = {};
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;  // one direction, 12e9 for PCIe 3.0 x16
  double latency_s = 0;              // per message, 1e-5
  // Bytes of a send that may still be on their way when the send returns
  // and its stream goes on: the socket send buffer a message is written
  // into (TCP); 0: a send holds its stream until its message has arrived.
  double send_buffer_bytes = 0;
  // A token bucket on the link (as `tc tbf` shapes one, or a cloud NIC's
  // burst allowance): after an idle period up to this many bytes cross at
  // once, the bucket refilling at the bandwidth while the link is idle;
  // 0: every byte at the bandwidth.
  double burst_bytes = 0;
};

struct HostSpec {
  double link_bandwidth_bytes_per_s = 0;  // device <-> host, one direction, per (physical) device
  double link_latency_s = 0;
  double reduce_bytes_per_s = 0;          // host summation throughput, all threads together
  int64_t threads = 1;                    // host threads available for reduction
  double stream_sync_s = 0;               // one device-stream synchronization
};

// Pipe-SGD's codec at a ring hop (seed 002 §3.2), in float32 bytes per
// second: encoding (compress and pack) and decoding. 0: free, as in a
// file without them.
struct CodecRates {
  double encode_bytes_per_s = 0;
  double decode_bytes_per_s = 0;
};

struct CollectiveSpec {
  double reduce_bytes_per_s = 0;  // on-device reduction throughput (gamma = 1/this)
  double sync_s = 0;              // fixed cost per collective call (t_sync)
  // Bytes per second a member packs its separate gradient (or weight)
  // tensors into the collective's one buffer and unpacks the result back,
  // both copies counted once per byte reduced. Optional in the file: 0 (the
  // default) where the collective reads the tensors in place (NCCL on
  // bucket views). The CPU probe measures the executor's own packing.
  double pack_bytes_per_s = 0;
  // The fixed part of a packing: seconds each call adds whatever its bytes
  // (the GPU's virtual workers wait for each copy down and up). Optional in
  // the file, with pack_bytes_per_s only: 0 (the default) where the packing
  // is memory copies alone (the CPU's).
  double pack_latency_s = 0;
  // Bytes per second of one hop of a collective inside a machine: every
  // member sends a chunk to one peer and receives one from another at once,
  // putting what it received in place. Optional in the file: 0 (the
  // default) where a hop runs at the intra-machine link's bandwidth. The CPU
  // probe measures it: two threads' copies at once share the memory system.
  double hop_bytes_per_s = 0;
  // Seconds of such a hop's fixed cost where it takes another path than
  // the link's one message (the GPU's virtual workers: a boundary device to
  // device, a collective's hop through the host). Optional in the file:
  // absent (the default) where a hop waits the intra-machine link's latency.
  std::optional<double> hop_latency_s = std::nullopt;
  // The codecs' rates (optional in the file, under "codecs"); the CPU
  // probe times the executor's own.
  CodecRates trunc16 = {};
  CodecRates quant8 = {};
  // The library AllReduce's (algorithm=mpi) hop inside a machine where it
  // takes a path of its own (NCCL between GPUs): a ring of these hops, its
  // sums inside them (no γ). Optional in the file (under "library"):
  // absent, it runs as the other algorithms' hops.
  struct LibraryHops {
    double hop_bytes_per_s = 0;
    double hop_latency_s = 0;
  };
  std::optional<LibraryHops> library = std::nullopt;
};

struct Cluster {
  std::string name;                 // "p40x4-pcie3"
  std::string description;          // testbed and where its figures come from
  int64_t machines = 1;
  int64_t devices_per_machine = 1;
  DeviceSpec device;
  LinkSpec intra_link;              // between devices of one machine
  LinkSpec inter_link;              // between machines (per machine NIC)
  HostSpec host;
  CollectiveSpec collective;
  // Where every machine of the cluster is emulated on one computer (network
  // namespaces, `cluster emulate`): that computer's cores, which all workers'
  // threads share, worker w's on core w mod shared_cores. The simulator then
  // shares each core among the work its workers put on it (docs/simulator.md).
  // Optional in the file: 0 (the default), each device its own.
  int64_t shared_cores = 0;
  // With shared_cores: the core time that computer's kernel spends per byte
  // crossing a link between machines (the emulated links' TCP stack, their
  // shaping, the veth and bridge hops), taken from the shared cores while the
  // links carry it (docs/simulator.md). Optional in the file: 0.
  double link_kernel_s_per_byte = 0;
  // Where each machine's devices_per_machine devices are virtual workers on
  // fewer physical devices (`--devices cuda:GxW`: W workers on one GPU): the
  // physical devices per machine, a machine's device d on its physical
  // d mod shared_devices. The simulator shares each physical device among
  // the compute ops running on it at once (DeviceSpec::
  // compute_rate_while_shared; docs/simulator.md). Optional in the file: 0
  // (the default), each device its own; at most devices_per_machine; not
  // with shared_cores.
  int64_t shared_devices = 0;
};

// The physical devices the workers of a machine share
// (Cluster::shared_devices) and the rate each of `computing` of a physical
// device's workers computes at (DeviceSpec::compute_rate_while_shared).
int64_t workers_per_shared_device(const Cluster& cluster);
// The physical device cluster device `device` runs on: itself, or with
// shared_devices N its machine's physical device (device mod
// devices_per_machine) mod N, numbered machine by machine.
int64_t physical_device_of(const Cluster& cluster, int64_t device);
double shared_device_rate(const Cluster& cluster, int64_t computing);

inline int64_t device_count(const Cluster& cluster) { return cluster.machines * cluster.devices_per_machine; }

void validate_cluster(const Cluster& cluster, const std::string& where);

// "forward 80 us + 10 us a layer, backward ..., update ...": a GPU
// worker's host time per compute op, each kind's, as the tools print it.
std::string host_per_op_text(const DeviceSpec::HostPerOp& host);

nlohmann::json cluster_to_json(const Cluster& cluster);
Cluster cluster_from_json(const nlohmann::json& doc, const std::string& where);

// A preset name (see cluster_presets()) or the path of a cluster JSON file.
Cluster load_cluster(const std::string& name_or_path, const std::string& where = "--cluster");

// The presets, in the order `cluster list` prints them.
const std::vector<Cluster>& cluster_presets();

}  // namespace trainsim
