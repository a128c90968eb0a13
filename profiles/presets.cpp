// Cluster presets: the seeds' testbeds (000, 002, 003, 004) and two modern
// H100 machines. Conventions (profiles/cluster.hpp): link bandwidths are one
// direction and effective (what a large transfer achieves), inter_link is one
// machine's NICs together, host.link is one device's link to host memory.
#include "profiles/cluster.hpp"

namespace trainsim {
namespace {

// STREAM-like kernels sustain about three quarters of a Xeon's or POWER8's
// theoretical DRAM bandwidth (assumed: typical STREAM triad / peak ratios).
constexpr double kHostSustainedFraction = 0.75;

// Summing a received gradient into an accumulator reads two bytes and writes
// one per byte reduced, so reduction throughput is memory bandwidth / 3.
constexpr double kReduceTrafficPerByte = 3.0;

// Host reduction rate of all threads together from the sockets' DRAM peak.
constexpr double host_reduce_bytes_per_s(double dram_peak_bytes_per_s) {
  return dram_peak_bytes_per_s * kHostSustainedFraction / kReduceTrafficPerByte;
}

// On-device summation: the reduction kernel streams at the memory bandwidth.
constexpr double device_reduce_bytes_per_s(double memory_bytes_per_s) {
  return memory_bytes_per_s / kReduceTrafficPerByte;
}

// PCIe 3.0 x16: 8 GT/s × 16 lanes × 128/130 = 15.75 GB/s per direction;
// large cudaMemcpy / P2P transfers reach about 12 GB/s (assumed: typical
// bandwidthTest / p2pBandwidthLatencyTest results on Pascal systems).
constexpr LinkSpec kPcie3x16{12e9, 10e-6};  // 10 us: cudaMemcpyAsync call + DMA setup (assumed)

// 10 Gb/s Ethernet: 1.25 GB/s line rate, ~9.4 Gb/s TCP goodput; 50 us per
// message for OpenMPI over the kernel TCP stack (assumed: typical ping-pong).
constexpr LinkSpec kTenGbE{1.17e9, 50e-6};

// Tesla P40 (NVIDIA datasheet): 24 GB GDDR5, 346 GB/s; fp32 3840 cores ×
// 1531 MHz boost × 2 = 11.76 TFLOP/s.
DeviceSpec tesla_p40() { return {"Tesla P40", "gpu", 24e9, 11.76e12, 346e9}; }

// TITAN Xp (NVIDIA specifications): 12 GB GDDR5X, 11.4 Gb/s × 384 bit / 8 =
// 547.7 GB/s; fp32 3840 cores × 1582 MHz boost × 2 = 12.15 TFLOP/s.
DeviceSpec titan_xp() { return {"TITAN Xp", "gpu", 12e9, 12.15e12, 547.7e9}; }

// Tesla P100 SXM2 (NVIDIA datasheet): 16 GB HBM2, 732 GB/s; fp32 10.6 TFLOP/s.
DeviceSpec tesla_p100_sxm2() { return {"Tesla P100-SXM2-16GB", "gpu", 16e9, 10.6e12, 732e9}; }

// H100 SXM5 (NVIDIA datasheet): 80 GB HBM3, 3.35 TB/s; fp32 (non-tensor)
// 67 TFLOP/s. TF32 tensor cores are faster, but the profiles are fp32.
DeviceSpec h100_sxm5() { return {"H100 SXM5 80GB", "gpu", 80e9, 67e12, 3.35e12}; }

// DGX H100 host: PCIe Gen5 x16 per GPU, 64 GB/s per direction nominal, ~55
// GB/s achieved by one GPU copying alone (assumed; GPUs copying at once may
// share switch uplinks, not modelled); 2 × Xeon Platinum 8480C, 8 channels
// DDR5-4800 each = 2 × 307.2 GB/s; 112 cores; 10 us per stream
// synchronization (assumed).
constexpr HostSpec kDgxH100Host{55e9, 10e-6, host_reduce_bytes_per_s(2 * 307.2e9), 112, 10e-6};

// DGX H100 compute fabric: 8 ConnectX-7 NICs at 400 Gb/s (50 GB/s line rate,
// ~48 GB/s RDMA achieved, assumed) = 384 GB/s per machine; 5 us per message
// for NCCL/MPI over InfiniBand verbs (assumed).
constexpr LinkSpec kDgxH100Network{8 * 48e9, 5e-6};

Cluster p40x4_pcie3() {
  return Cluster{
      .name = "p40x4-pcie3",
      .description = "Seed 000 (DualPipe/SpecTrain) §4.1: Falconwitch PS1816, 4 Tesla P40 on PCIe 3.0 x16 "
                     "with concurrent P2P transfers, one Xeon E5-2650 host",
      .machines = 1,
      .devices_per_machine = 4,
      .device = tesla_p40(),
      // Seed 000 §4.1: P2P transfers between distinct GPU pairs run at once.
      .intra_link = kPcie3x16,
      // Unused (one machine); the seed names no network, 10 GbE assumed.
      .inter_link = kTenGbE,
      // Xeon E5-2650 (v4 assumed: the seed's DDR4-2400) has 12 cores and 4
      // channels of DDR4-2400 = 76.8 GB/s; one socket assumed ("the CPU").
      // 20 us per cudaStreamSynchronize in the CUDA 8 era (assumed).
      .host = {kPcie3x16.bandwidth_bytes_per_s, kPcie3x16.latency_s, host_reduce_bytes_per_s(76.8e9), 12, 20e-6},
      // 20 us per call: an NCCL kernel launch plus a handshake between ranks
      // over PCIe (assumed).
      .collective = {device_reduce_bytes_per_s(346e9), 20e-6},
  };
}

Cluster titanxp_4node_10gbe() {
  return Cluster{
      .name = "titanxp-4node-10gbe",
      .description = "Seed 002 (Pipe-SGD) §4 Metrics and Setup: 4 nodes, each one TITAN Xp and a Xeon E5-2640, "
                     "connected by 10 Gb Ethernet",
      .machines = 4,
      .devices_per_machine = 1,
      .device = titan_xp(),
      // Unused (one GPU per machine); PCIe 3.0 x16 as on the host link.
      .intra_link = kPcie3x16,
      // Seed 002 §4: one 10 GbE port per node.
      .inter_link = kTenGbE,
      // Xeon E5-2640 (v4 assumed, 2017): 10 cores, 4 channels DDR4-2133 =
      // 68.3 GB/s; 20 us per stream synchronization (CUDA 8, assumed).
      .host = {kPcie3x16.bandwidth_bytes_per_s, kPcie3x16.latency_s, host_reduce_bytes_per_s(68.3e9), 10, 20e-6},
      // 50 us per call: each AllReduce starts with a message round over TCP
      // (assumed, one 10 GbE latency).
      .collective = {device_reduce_bytes_per_s(547.7e9), 50e-6},
  };
}

Cluster p100x4_nvlink_power8() {
  return Cluster{
      .name = "p100x4-nvlink-power8",
      .description = "Seed 003 (CPU-GPU data parallel) §5.1: IBM Power System S822LC for HPC (\"Minsky\"), "
                     "two 10-core POWER8, 4 Tesla P100 on NVLink to each other and to the CPUs",
      .machines = 1,
      .devices_per_machine = 4,
      .device = tesla_p100_sxm2(),
      // Seed 003 §5.1: GPU pairs 0-1 and 2-3 share one 80 GB/s duplex NVLink
      // (40 GB/s per direction); the other pairs route through both CPUs and
      // their X-bus (38.4 GB/s), so a 4-GPU ring runs at about 32 GB/s
      // (assumed: ~85% of the slower hop).
      .intra_link = {32e9, 5e-6},
      // Unused (one machine); the seed names no network, 10 GbE assumed.
      .inter_link = kTenGbE,
      // Seed 003 §5.1: two 80 GB/s duplex NVLinks from each CPU, one per GPU,
      // 40 GB/s per direction; ~34 GB/s achieved (assumed: 85%). POWER8
      // S822LC: 115 GB/s DRAM per socket (IBM specification), 2 sockets; 20
      // physical cores (SMT threads add no memory bandwidth). 20 us per
      // stream synchronization (CUDA 8, assumed).
      .host = {34e9, 5e-6, host_reduce_bytes_per_s(2 * 115e9), 20, 20e-6},
      // 15 us per call: NCCL launch and handshake over NVLink (assumed).
      .collective = {device_reduce_bytes_per_s(732e9), 15e-6},
  };
}

Cluster titanxp_8x6_ib100() {
  return Cluster{
      .name = "titanxp-8x6-ib100",
      .description = "Seed 004 (Parallax) §7.1: 8 machines, each 6 TITAN Xp and two 18-core Xeon E5-2695, "
                     "Mellanox ConnectX-4 100 Gb/s InfiniBand",
      .machines = 8,
      .devices_per_machine = 6,
      .device = titan_xp(),
      // Six GPUs on PCIe 3.0 x16 behind PCIe switches (assumed; the seed
      // names no topology); GeForce P2P may stage through host memory, so
      // 10 GB/s rather than 12 (assumed).
      .intra_link = {10e9, 10e-6},
      // Seed 004 §7.1: one ConnectX-4 at 100 Gb/s = 12.5 GB/s line rate,
      // ~12 GB/s achieved (assumed); 5 us per message over verbs (assumed).
      .inter_link = {12e9, 5e-6},
      // 2 × Xeon E5-2695 v4 (2.10 GHz, 18 cores): 4 channels DDR4-2400 each =
      // 2 × 76.8 GB/s; 36 cores. CUDA 9 stream synchronization 20 us (assumed).
      .host = {kPcie3x16.bandwidth_bytes_per_s, kPcie3x16.latency_s, host_reduce_bytes_per_s(2 * 76.8e9), 36,
               20e-6},
      // 30 us per call: NCCL 2.1 launch plus an InfiniBand handshake (assumed).
      .collective = {device_reduce_bytes_per_s(547.7e9), 30e-6},
  };
}

Cluster h100x8_nvlink() {
  return Cluster{
      .name = "h100x8-nvlink",
      .description = "DGX H100 style: 8 H100 SXM5 on NVLink 4 through NVSwitch, 2 Xeon Platinum 8480C "
                     "(not a seed testbed; a modern reference)",
      .machines = 1,
      .devices_per_machine = 8,
      .device = h100_sxm5(),
      // NVLink 4: 18 links × 25 GB/s = 450 GB/s per direction per GPU
      // (datasheet 900 GB/s bidirectional); ~360 GB/s achieved by NCCL
      // without NVLink SHARP (assumed: 80%); 3 us per message (assumed).
      .intra_link = {360e9, 3e-6},
      // Unused with one machine; the DGX's own NICs.
      .inter_link = kDgxH100Network,
      .host = kDgxH100Host,
      // 10 us per call: NCCL kernel launch plus an NVSwitch handshake (assumed).
      .collective = {device_reduce_bytes_per_s(3.35e12), 10e-6},
  };
}

Cluster h100x4node_ib400() {
  return Cluster{
      .name = "h100x4node-ib400",
      .description = "4 DGX H100 style machines (8 H100 SXM5 on NVSwitch each), one 400 Gb/s InfiniBand NIC "
                     "per GPU (not a seed testbed; a modern reference)",
      .machines = 4,
      .devices_per_machine = 8,
      .device = h100_sxm5(),
      .intra_link = {360e9, 3e-6},  // as h100x8-nvlink
      .inter_link = kDgxH100Network,
      .host = kDgxH100Host,
      // 25 us per call: launch plus a handshake across the InfiniBand fabric
      // (assumed).
      .collective = {device_reduce_bytes_per_s(3.35e12), 25e-6},
  };
}

}  // namespace

const std::vector<Cluster>& cluster_presets() {
  static const std::vector<Cluster> presets{p40x4_pcie3(),       titanxp_4node_10gbe(), p100x4_nvlink_power8(),
                                            titanxp_8x6_ib100(), h100x8_nvlink(),       h100x4node_ib400()};
  return presets;
}

}  // namespace trainsim
