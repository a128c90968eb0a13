// Measures this machine as a cluster of CPU workers (`trainsim.cluster/1`):
// one machine whose devices are worker threads, its compute and memory rates,
// and the in-process channel between workers (exec's InProcessTransport).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"

namespace trainsim {

// One point of a channel sweep: a message of `bytes` took `one_way_s`.
struct ChannelSample {
  double bytes = 0;
  double one_way_s = 0;
};

// The fitted channel: time(n) = latency_s + n / bandwidth_bytes_per_s (the
// alpha-beta model, docs/equations.md §2: α + nβ with β = 1/bandwidth).
struct ChannelFit {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  // A token bucket's depth (LinkSpec::burst_bytes): where the large
  // messages' line crosses the time axis below the latency, the bytes the
  // bandwidth moves in that gap crossed at once (each ping-pong message
  // starts on a link idle while the reply crossed it); 0 where it does not.
  double burst_bytes = 0;
};

// Fits a sweep (any order, at least one sample, times > 0): latency_s = the
// one-way time of the smallest message (its bytes/bandwidth is negligible at
// a few bytes); bandwidth = 1 / slope of the least-squares line through the
// samples of at least max_bytes/16 bytes (the three largest of a ×4 sweep),
// where transfer time dominates. Where fewer than two such sizes exist or the
// slope is not positive (noise), bandwidth = largest bytes / its time.
ChannelFit fit_channel(std::vector<ChannelSample> samples);

// A packing's fixed part and rate (collective.pack_latency_s,
// pack_bytes_per_s) through two timed packings, a small one and the whole
// gradient's: the line through them, so the whole gradient costs exactly
// its time. Where the whole took no longer than the small one (noise, a
// gradient of a few bytes): no fixed part, and the whole's bytes over its
// time. bandwidth_bytes_per_s is the rate; burst_bytes 0.
ChannelFit fit_packing(ChannelSample small, ChannelSample whole);

// The library AllReduce's hops (collective.library) from its times over
// `members` at two sizes, as docs/equations.md §2's ring prices them: each
// time less t_sync (sync_s, which every call pays apart) is 2(p − 1)α +
// 2(p − 1)/p · n · β, no γ (the library sums inside its hops); the line
// through the two gives β and α, so both times are reproduced. Where the
// whole is no slower than the small one, or α would be negative: α = 0
// and β from the whole alone.
CollectiveSpec::LibraryHops fit_library_ring(int64_t members, ChannelSample small, ChannelSample whole, double sync_s);

struct ClusterProbeOptions {
  int64_t repeats = 5;                     // timed runs per measurement (median)
  int64_t warmups = 2;
  int64_t gemm_size = 512;                 // n of the n×n×n single-thread GEMM
  int64_t update_bytes = 64 << 20;         // parameters of the timed optimizer step (the model's, where known)
  int64_t min_message_bytes = 4;           // channel sweep, ×4 steps
  int64_t max_message_bytes = 16 << 20;
  int64_t reduce_bytes = 16 << 20;         // buffers of the float sum
  int64_t barrier_repeats = 200;           // barriers timed for collective.sync_s
  double barrier_late_s = 200e-6;          // how late the last thread arrives at each
  int64_t pack_bytes = 1 << 20;            // gradient bytes packed per collective (the model's, where known)
  int64_t pack_repeats = 50;               // packings timed for collective.pack_bytes_per_s
  int64_t handoff_repeats = 200;           // hand-offs timed for device.handoff_s
  double handoff_work_s = 100e-6;          // compute between them (the other thread falls asleep)
  int64_t stream_bytes = 16 << 20;         // each TCP stream timed for link_kernel_s_per_byte (emulated hosts)
  int64_t sharing_repeats = 15;            // AllReduces timed alone and beside compute (sharing_probe.hpp)
  // One process of a run shared by `as_workers` processes (> 0): the
  // hand-off's threads sit where worker `as_worker`'s compute and
  // communication threads sit in that run, and no peer thread is timed (the
  // peer is another process). 0: a run of the probe's own workers.
  int32_t as_worker = 0;
  int64_t as_workers = 0;
  // Called before each of measure_cpu_cluster's probes: processes probing
  // at once (a barrier) start each probe together, so one's latency is
  // never timed while another's GEMM holds the cores.
  std::function<void()> together;
};

// One machine, devices_per_machine = workers, device kind "cpu":
//   memory_bytes = MemTotal / workers;
//   peak_flops_per_s = 2n³ / median time of an n×n Eigen GEMM, one thread per
//     worker, `workers` of them at once (each device's rate while all work);
//   memory_bytes_per_s = kUpdatePassesPerParamByte · update_bytes / median time
//     of the executor's momentum-SGD step of update_bytes of parameters,
//     `workers` at once: the rate at which the cost
//     models' 5-pass update takes the executor's time (a copy's STREAM rate
//     put text-bag's 12.8 MB update at 1.4-1.9 times its measured time);
//   compute_rate_while_communicating = cpu_compute_rate_while_communicating
//     (workers, usable_cores());
//   handoff_s = median time worker 0's compute thread, on its core, takes
//     from an op's end to its next op when the op wakes a communication
//     thread on that thread's core (worker_thread_core): the executor's
//     flag, wake-up and yield, the other thread's turn and its sleep;
//   host.link_bandwidth_bytes_per_s (workers > 1) = pack_bytes / median time
//     of every worker copying pack_bytes into a buffer of its own at once,
//     as CGDP's workers copy their chunks together (one worker too);
//   intra_link = inter_link (and the host link's latency, and its bandwidth
//     with one worker): bandwidth from fit_channel of a
//     ping-pong between two threads over InProcessTransport (one-way = half
//     the median round trip; the sender copies its buffer into the message,
//     as workers do); latency = the median time from a send's start on
//     worker 0 to the wake-up of worker 1's compute thread, through its
//     receive thread, both asleep (handoff_work_s between messages), on the
//     cores worker_thread_core gives them: the executor's path of a message;
//   host.reduce_bytes_per_s = bytes of one buffer / median time of a += b
//     (one thread, reduce_bytes); host.threads = hardware_concurrency;
//     host.stream_sync_s = 0 (no streams on a CPU);
//   collective.reduce_bytes_per_s = the same sum on `workers` threads at once,
//     each over a ring member's chunk (pack_bytes / workers), as the members
//     of a collective sum at once (one thread's rate where workers = 1);
//   collective.hop_bytes_per_s (workers > 1) = bytes / median time of
//     one hop of the executor's ring with every worker at once: send a chunk
//     to the next (a copy into the message), receive the previous one's and
//     copy it into place (chunks of at least 1 MiB, so α stays small);
//   collective.sync_s = median time of a barrier of `workers` threads from the
//     last arrival to the last release, the last thread arriving
//     barrier_late_s after the others (asleep by then, as a pipeline stage
//     waiting for its neighbour is);
//   collective.pack_bytes_per_s = pack_bytes / median time of what the
//     executor does around an AllReduce: flatten four gradient tensors of
//     pack_bytes in all into one buffer, scale it by 1/workers and unflatten
//     it back, `workers` threads at once;
//   collective.trunc16, quant8 = the codec's encode and decode rates of a
//     ring member's chunk, `workers` threads at once (codec_probe.hpp).
// name "cpu<workers>-measured". InputError naming --concurrent (the flag the
// worker count comes from) when workers < 1.
Cluster measure_cpu_cluster(int64_t workers, const ClusterProbeOptions& options = {});

// The collective the executor's workers of one process run on the host,
// over the in-process transport, as measure_cpu_cluster times it: into c,
//   hop_bytes_per_s = a ring hop of the larger of gradient_bytes / workers
//     and 1 MiB, every worker at once;
//   hop_latency_s = a message's latency to the receiver's asleep threads;
//   reduce_bytes_per_s = the sum of a chunk (gradient_bytes / workers),
//     `workers` threads at once;
//   sync_s = a barrier of `workers` threads.
// What the collectives of a GPU's virtual workers cost between their
// gradients' copies to and from the GPU (cuda_cluster_probe.hpp).
// TRAINSIM_CHECK that workers > 1 and gradient_bytes >= 4; InputError as
// measure_cpu_cluster's for a worker count this machine cannot run.
void measure_host_collective(int64_t workers, int64_t gradient_bytes, const ClusterProbeOptions& o, CollectiveSpec& c);

// Several probes of one machine folded into one: each measured rate and
// time is the median over `clusters` (so one probe taken while the machine
// was disturbed moves nothing); names, counts and derived fields are the
// first's. TRAINSIM_CHECK that they are not empty and have the same shape.
Cluster median_cluster(const std::vector<Cluster>& clusters);

// A worker's compute rate while it communicates, relative to its profiled
// rate, derived from where the executor runs its threads rather than timed (a
// timing on a shared 2-core machine ranged from 0.1 to 1): 1 when each worker
// has a spare core for its communication thread, else 0.5, the compute and
// the communication thread sharing the worker's core
// (communication_shares_compute_core).
double cpu_compute_rate_while_communicating(int64_t workers, int64_t cores);

// The default options with pack_bytes = update_bytes = the profile's
// gradient bytes (its parameters': what a data-parallel worker packs per
// AllReduce and updates), at least 4.
ClusterProbeOptions probe_options_for(const Profile& profile);

}  // namespace trainsim
