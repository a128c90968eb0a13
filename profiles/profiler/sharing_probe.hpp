// Where a worker's compute and its communication share cores (CPU ranks):
// what each keeps of its rate beside the other, measured over the workers'
// own transport with the threads where a run puts them.
#pragma once

#include <vector>

#include "exec/transport/transport.hpp"
#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim {

struct SharingRates {
  // Compute kernels done per second on every worker while a ring AllReduce
  // of them all runs, over the rate with no AllReduce (every worker
  // computing in both): DeviceSpec::compute_rate_while_communicating.
  double compute = 1;
  // The AllReduce's time with every member idle over its time while every
  // member's compute thread runs kernels beside it:
  // DeviceSpec::collective_rate_while_computing.
  double collective = 1;
  // The AllReduce's median time beside compute, seconds.
  double busy_s = 0;
};

// Called by every worker of `transport` at once. Each worker runs two
// threads pinned as a run pins its compute and communication threads
// (worker_thread_core): the communication thread times options.sharing_repeats ring
// AllReduces of options.pack_bytes over all workers, each after a barrier,
// first alone, then beside its compute thread, which runs n×n×n GEMMs
// (n = kSharingKernelSize) from a barrier before the first AllReduce to the
// end of the last; between the two the compute threads run as long with no
// AllReduce. Each ratio is a worker's own; worker 0 returns their medians,
// each in [kMinSharingRate, 1]; the other workers return {}. With one
// worker: {}.
inline constexpr int64_t kSharingKernelSize = 128;
inline constexpr double kMinSharingRate = 0.01;
SharingRates measure_sharing_rates(Transport& transport, int self, const ClusterProbeOptions& options);

// The part of the shared cores the links' kernel work takes while a ring
// AllReduce of `bytes` over `workers` ranks on `hosts` hosts crosses them in
// `seconds` (Cluster::link_kernel_s_per_byte; sim/des/engine_setup.cpp,
// links_kernel_cores), at most 1: what a compute rate measured beside it
// lost to the kernel rather than to the collective's own threads.
double ring_kernel_share(double link_kernel_s_per_byte, int64_t hosts, int64_t workers, double bytes, double seconds,
                         int64_t cores);

}  // namespace trainsim
