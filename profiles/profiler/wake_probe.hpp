// Inside profiles/profiler: the probes of how fast the executor's threads
// wake one another (a barrier, a hand-off between a worker's streams, a
// message from one worker's stream to another's), as measure_cpu_cluster
// and the MPI probe price a pipeline's small steps.
#pragma once

#include <cstdint>

#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim {

// The collective's sync_s: a barrier of `workers` threads, the last late.
double measure_barrier_s(int64_t workers, const ClusterProbeOptions& o);
// The device's handoff_s: a compute thread waking its worker's send thread.
double measure_handoff_s(int64_t workers, const ClusterProbeOptions& o);
// A link's latency as a pipeline pays it: a message waking the receiver's
// receive thread, then its compute thread.
double measure_message_latency_s(int64_t workers, const ClusterProbeOptions& o);

}  // namespace trainsim
