// Measures a cluster whose workers are joined by a transport, each running
// where it will train (one MPI rank per worker, on one or several hosts):
// the links within and between hosts as the workers' own messages cross
// them, and each worker's device with every worker busy at once.
#pragma once

#include <vector>

#include "exec/transport/transport.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim {

// Called by every worker of `transport` at once, each with its own `self`
// (every rank of an MPI run, or every thread of a test). host_of[w] is the
// host worker w runs on (0, 1, ...: every host with as many workers;
// InputError naming mpirun otherwise). Returns, on every worker, the
// cluster worker 0 assembles:
//   machines = hosts, devices_per_machine = workers per host;
//   device and host figures: measure_cpu_cluster(1) taken by every worker at
//     once (each device's rate while all work), each figure the median over
//     the workers (median_cluster), with device.handoff_s timed by each
//     worker in turn, the others asleep;
//   device.compute_rate_while_communicating (two or more workers): measured
//     with ring AllReduces of options.pack_bytes beside GEMMs on every
//     worker (sharing_probe.hpp), over what the links' kernel work leaves
//     of the shared cores (ring_kernel_share); the AllReduce's own rate
//     beside them is in the description, and collective_rate_while_computing
//     is left unset (derived);
//   shared_cores = this computer's usable cores where every worker runs on
//     it (one kernel boot id: emulated hosts, or ranks on one machine), else 0;
//   link_kernel_s_per_byte, with shared_cores and two or more hosts: this
//     computer's kernel time (/proc/stat) while blocking TCP streams of
//     options.stream_bytes go from every host's first worker to the next
//     host's, all at once (link_stream.hpp), less the other workers' system
//     time meanwhile, per byte moved; 0 where a stream could not be made;
//   intra_link (two or more workers per host): fit_channel of a ping-pong
//     sweep between host 0's first two workers, each sending its buffer
//     back (one-way = half the median round trip; latency = the smallest
//     message's one-way time), the other workers idle;
//   inter_link (two or more hosts): the same between worker 0 and host 1's
//     first worker;
//   a link the cluster lacks takes the other's figures;
//   both links' send_buffer_bytes: the transport's (Transport::send_buffer_bytes);
//   collective.sync_s (two or more workers): the transport's barrier across
//     every worker, options.barrier_repeats back to back, time per barrier;
//   collective.hop_bytes_per_s (two or more workers per host): one hop of a
//     ring within each host, every host at once (β inside a machine); 0 with
//     one worker per host (a ring's hops then cross the inter link).
Cluster measure_transport_cluster(Transport& transport, int self, const std::vector<int>& host_of,
                                  const ClusterProbeOptions& options = {});

}  // namespace trainsim
