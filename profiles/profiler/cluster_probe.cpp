// measure_cpu_cluster: the machine's compute, memory, reduction and channel
// rates, measured with Eigen and exec's in-process transport, as a cluster.
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/codec_probe.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/tensor/tensor.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"
#include "profiles/profiler/wake_probe.hpp"

namespace trainsim {
namespace {

// Single-thread fp32 GEMM rate per worker: 2n³ FLOPs per n×n×n product.
double measure_gemm_flops_per_s(int64_t workers, const ClusterProbeOptions& o) {
  const int64_t n = o.gemm_size;
  std::vector<RowMajorMatrix> a(static_cast<size_t>(workers)), b(a.size()), c(a.size());
  for (size_t t = 0; t < a.size(); ++t) {
    a[t] = RowMajorMatrix::Constant(n, n, 0.5f);
    b[t] = RowMajorMatrix::Constant(n, n, 0.25f);
    c[t] = RowMajorMatrix::Zero(n, n);
  }
  const double seconds = concurrent_median_s(workers, o.warmups, o.repeats, [&](int64_t t) {
    const auto i = static_cast<size_t>(t);
    c[i].noalias() = a[i] * b[i];
  });
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / seconds;
}

// The executor's dense optimizer step (momentum SGD, as `trainsim run` and
// the profiler use) of update_bytes of parameters, `workers` at once, as the
// memory rate that makes the cost models' update (kUpdatePassesPerParamByte
// passes) take that time: what a data-parallel worker's step of a table it
// densified for the exchange takes, the update no profile measures. A
// copy's rate predicts it poorly: one read and one non-temporal write
// stream against the update's three reads and two writes.
double measure_update_bytes_per_s(int64_t workers, const ClusterProbeOptions& o) {
  const int64_t floats = std::max<int64_t>(1, o.update_bytes / 4);
  std::vector<Weights> weights(static_cast<size_t>(workers));
  std::vector<Gradients> grads(weights.size());
  std::vector<Sgd> optimizers;
  for (size_t t = 0; t < weights.size(); ++t) {
    weights[t] = {{Tensor({floats})}};
    ParamGrad g;
    g.dense = Tensor({floats});
    grads[t] = {{std::move(g)}};
    optimizers.emplace_back(SgdOptions{1e-4, 0.9, 0.0});
  }
  const double seconds = concurrent_median_s(workers, o.warmups, o.repeats, [&](int64_t t) {
    const auto i = static_cast<size_t>(t);
    optimizers[i].step(weights[i], grads[i], 0, 0);
  });
  return kUpdatePassesPerParamByte * 4.0 * static_cast<double>(floats) / seconds;
}

// Rate of summing one float buffer into another (a += b) on `threads`
// threads at once, each its own buffers of `bytes`, in bytes of one buffer.
double measure_reduce_bytes_per_s(int64_t threads, int64_t bytes, int64_t repeats, const ClusterProbeOptions& o) {
  const auto floats = static_cast<Eigen::Index>(std::max<int64_t>(1, bytes / 4));
  std::vector<Eigen::VectorXf> a(static_cast<size_t>(threads), Eigen::VectorXf::Constant(floats, 1.0f));
  std::vector<Eigen::VectorXf> b(a.size(), Eigen::VectorXf::Constant(floats, 1e-3f));
  const double seconds = concurrent_median_s(threads, o.warmups, repeats, [&](int64_t t) {
    a[static_cast<size_t>(t)] += b[static_cast<size_t>(t)];
  });
  return static_cast<double>(floats) * 4.0 / seconds;
}

// Every worker copying `bytes` into a buffer of its own at once, as CGDP's
// workers copy their chunks to and from the host together (seed 003 §3.2);
// bytes of one copy per second.
double measure_concurrent_copy_bytes_per_s(int64_t workers, int64_t bytes, const ClusterProbeOptions& o) {
  const auto floats = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
  std::vector<std::vector<float>> from(static_cast<size_t>(workers), std::vector<float>(floats, 1.0f));
  std::vector<std::vector<float>> to(from.size(), std::vector<float>(floats, 0.0f));
  const double seconds = concurrent_median_s(workers, o.warmups, o.pack_repeats, [&](int64_t t) {
    const auto i = static_cast<size_t>(t);
    std::copy(from[i].begin(), from[i].end(), to[i].begin());
  });
  return static_cast<double>(floats) * 4.0 / seconds;
}

// One hop of a collective as the executor's run (exec/transport/ring_all_reduce.cpp):
// every worker sends a chunk of `bytes` to the next (copying it into the
// message) and receives the previous one's, copying it into place, all at
// once; bytes of one chunk per second.
double measure_hop_bytes_per_s(int64_t workers, int64_t bytes, const ClusterProbeOptions& o) {
  const auto floats = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
  const int p = static_cast<int>(workers);
  InProcessTransport transport(p);
  std::vector<std::vector<float>> chunks(static_cast<size_t>(p), std::vector<float>(floats, 1.0f));
  const double seconds = concurrent_median_s(workers, o.warmups, o.pack_repeats, [&](int64_t t) {
    const int self = static_cast<int>(t);
    std::vector<float>& chunk = chunks[static_cast<size_t>(t)];
    transport.send(self, (self + 1) % p, 0, std::vector<float>(chunk));
    const std::vector<float> received = transport.recv(self, (self - 1 + p) % p, 0);
    std::copy(received.begin(), received.end(), chunk.begin());
  });
  return static_cast<double>(floats) * 4.0 / seconds;
}

// Ping-pong over InProcessTransport: worker 0 sends n bytes, worker 1 sends
// them back; each side copies its buffer into the message it sends.
std::vector<ChannelSample> measure_channel(const ClusterProbeOptions& o) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = o.min_message_bytes; bytes <= o.max_message_bytes; bytes *= 4) sizes.push_back(bytes);
  std::vector<ChannelSample> samples;
  InProcessTransport transport(2);
  run_workers(transport, 2, [&](int w) {
    const int peer = 1 - w;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto tag = static_cast<int64_t>(k);
      std::vector<float> buffer(static_cast<size_t>(std::max<int64_t>(1, sizes[k] / 4)), 1.0f);
      std::vector<double> round_trip_s;
      for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
        const double start_s = now_s();
        if (w == 0) {
          transport.send(w, peer, tag, std::vector<float>(buffer));
          buffer = transport.recv(w, peer, tag);
        } else {
          buffer = transport.recv(w, peer, tag);
          transport.send(w, peer, tag, std::vector<float>(buffer));
        }
        if (r >= o.warmups) round_trip_s.push_back(now_s() - start_s);
      }
      if (w == 0) samples.push_back({static_cast<double>(buffer.size() * sizeof(float)), median_s(round_trip_s) / 2});
    }
  });
  return samples;
}

// The executor's packing around a collective (exec/interpreter/collective_ops.cpp, all_reduce):
// flatten, scale by the mean, unflatten; bytes of gradient per second.
double measure_pack_bytes_per_s(int64_t workers, const ClusterProbeOptions& o) {
  constexpr int64_t kTensors = 4;
  const int64_t floats = std::max<int64_t>(kTensors, o.pack_bytes / 4) / kTensors;
  std::vector<Gradients> sets(static_cast<size_t>(workers));
  for (Gradients& g : sets) {
    for (int64_t t = 0; t < kTensors; ++t) {
      ParamGrad p;
      p.dense = Tensor({floats});
      std::fill(p.dense.data.begin(), p.dense.data.end(), 1.0f);
      g.push_back({std::move(p)});
    }
  }
  const float mean = 1.0f / static_cast<float>(workers);
  const double seconds = concurrent_median_s(workers, o.warmups, o.pack_repeats, [&](int64_t t) {
    Gradients& g = sets[static_cast<size_t>(t)];
    std::vector<float> flat = flatten_gradients(g, 0, kTensors - 1);
    for (float& v : flat) v *= mean;
    unflatten_gradients(flat, g, 0, kTensors - 1);
  });
  return 4.0 * static_cast<double>(floats * kTensors) / seconds;
}

void check_probe_options(int64_t workers, const ClusterProbeOptions& o) {
  if (workers < 1 || workers > max_worker_threads()) {
    throw InputError("--concurrent", "is " + std::to_string(workers),
                     "1 to " + std::to_string(max_worker_threads()) + " workers: 4 per core, never over " +
                         std::to_string(kMaxWorkerThreads));
  }
  const bool ok = o.repeats >= 1 && o.warmups >= 0 && o.gemm_size >= 1 && o.update_bytes >= 4 &&
                  o.min_message_bytes >= 4 && o.max_message_bytes >= o.min_message_bytes && o.reduce_bytes >= 4 &&
                  o.barrier_repeats >= 1 && o.barrier_late_s >= 0 && o.pack_bytes >= 4 && o.pack_repeats >= 1 &&
                  o.as_worker >= 0 && (o.as_workers == 0 || o.as_worker < o.as_workers) &&
                  o.handoff_repeats >= 1 && o.handoff_work_s >= 0;
  TRAINSIM_CHECK(ok, "cluster probe options out of range");
}

}  // namespace

// Alpha-beta link model (docs/equations.md §2): t(n) = latency + n / bandwidth.
ChannelFit fit_channel(std::vector<ChannelSample> samples) {
  TRAINSIM_CHECK(!samples.empty(), "fit_channel needs at least one sample");
  std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  const ChannelSample& largest = samples.back();
  ChannelFit fit;
  fit.latency_s = samples.front().one_way_s;
  fit.bandwidth_bytes_per_s = largest.bytes / largest.one_way_s;
  std::vector<ChannelSample> large;
  for (const ChannelSample& s : samples) {
    if (s.bytes >= largest.bytes / 16) large.push_back(s);
  }
  if (large.size() < 2) return fit;
  double mean_bytes = 0, mean_s = 0;
  for (const ChannelSample& s : large) {
    mean_bytes += s.bytes;
    mean_s += s.one_way_s;
  }
  mean_bytes /= static_cast<double>(large.size());
  mean_s /= static_cast<double>(large.size());
  double covariance = 0, variance = 0;
  for (const ChannelSample& s : large) {
    covariance += (s.bytes - mean_bytes) * (s.one_way_s - mean_s);
    variance += (s.bytes - mean_bytes) * (s.bytes - mean_bytes);
  }
  const double slope_s_per_byte = covariance / variance;
  if (slope_s_per_byte > 0) {
    fit.bandwidth_bytes_per_s = 1.0 / slope_s_per_byte;
    const double intercept_s = mean_s - slope_s_per_byte * mean_bytes;
    fit.burst_bytes = std::max(0.0, fit.latency_s - intercept_s) * fit.bandwidth_bytes_per_s;
  }
  return fit;
}

CollectiveSpec::LibraryHops fit_library_ring(int64_t members, ChannelSample small, ChannelSample whole, double sync_s) {
  TRAINSIM_CHECK(members >= 2 && whole.bytes > small.bytes && small.bytes > 0 && small.one_way_s > 0 &&
                     whole.one_way_s > 0 && sync_s >= 0,
                 "fit_library_ring: two members or more, a small AllReduce and a larger whole, each timed");
  const double steps = 2.0 * static_cast<double>(members - 1);  // 2(p − 1) hops
  const double share = steps / static_cast<double>(members);    // 2(p − 1)/p of the bytes
  const double u_small = std::max(0.0, small.one_way_s - sync_s), u_whole = std::max(0.0, whole.one_way_s - sync_s);
  CollectiveSpec::LibraryHops hops;
  if (u_whole > u_small) {
    const double beta = (u_whole - u_small) / (share * (whole.bytes - small.bytes));
    const double alpha = (u_whole - share * whole.bytes * beta) / steps;
    if (alpha > 0) return {1.0 / beta, alpha};
  }
  // No fixed part to tell (the whole no slower, or the line below the
  // origin): the whole's bytes at its time.
  hops.hop_bytes_per_s = share * whole.bytes / (u_whole > 0 ? u_whole : whole.one_way_s);
  return hops;
}

ChannelFit fit_packing(ChannelSample small, ChannelSample whole) {
  TRAINSIM_CHECK(whole.bytes > small.bytes && small.bytes > 0 && small.one_way_s > 0 && whole.one_way_s > 0,
                 "fit_packing: a small packing and a larger whole, each timed");
  ChannelFit fit;
  fit.bandwidth_bytes_per_s = whole.bytes / whole.one_way_s;
  if (whole.one_way_s > small.one_way_s) {
    fit.bandwidth_bytes_per_s = (whole.bytes - small.bytes) / (whole.one_way_s - small.one_way_s);
    fit.latency_s = std::max(0.0, whole.one_way_s - whole.bytes / fit.bandwidth_bytes_per_s);
    // Clamped at 0 (the line crossing below the origin): the whole's bytes over its time.
    if (fit.latency_s == 0) fit.bandwidth_bytes_per_s = whole.bytes / whole.one_way_s;
  }
  return fit;
}

// Each worker computes on one thread and communicates on another (the
// executor's streams); where they share the worker's core, each gets half.
double cpu_compute_rate_while_communicating(int64_t workers, int64_t cores) {
  TRAINSIM_CHECK(workers >= 1, "at least one worker");
  return communication_shares_compute_core(workers, std::max<int64_t>(1, cores)) ? 0.5 : 1.0;
}

Cluster median_cluster(const std::vector<Cluster>& clusters) {
  TRAINSIM_CHECK(!clusters.empty(), "at least one cluster");
  Cluster out = clusters.front();
  for (const Cluster& c : clusters) {
    TRAINSIM_CHECK(c.machines == out.machines && c.devices_per_machine == out.devices_per_machine,
                   "probes of one machine");
  }
  const auto median_of = [&](auto field) {
    std::vector<double> samples;
    for (const Cluster& c : clusters) samples.push_back(field(c));
    return median_s(samples);
  };
  out.device.peak_flops_per_s = median_of([](const Cluster& c) { return c.device.peak_flops_per_s; });
  out.device.memory_bytes_per_s = median_of([](const Cluster& c) { return c.device.memory_bytes_per_s; });
  out.device.handoff_s = median_of([](const Cluster& c) { return c.device.handoff_s; });
  out.device.compute_rate_while_shared = median_of([](const Cluster& c) { return c.device.compute_rate_while_shared; });
  out.device.collective_rate_while_computing =
      median_of([](const Cluster& c) { return c.device.collective_rate_while_computing; });
  out.host.stream_sync_s = median_of([](const Cluster& c) { return c.host.stream_sync_s; });
  for (auto kind :
       {&DeviceSpec::HostPerOp::forward, &DeviceSpec::HostPerOp::backward, &DeviceSpec::HostPerOp::update}) {
    (out.device.host_per_op.*kind).fixed_s =
        median_of([&](const Cluster& c) { return (c.device.host_per_op.*kind).fixed_s; });
    (out.device.host_per_op.*kind).per_layer_s =
        median_of([&](const Cluster& c) { return (c.device.host_per_op.*kind).per_layer_s; });
  }
  out.intra_link.bandwidth_bytes_per_s = median_of([](const Cluster& c) { return c.intra_link.bandwidth_bytes_per_s; });
  out.intra_link.latency_s = median_of([](const Cluster& c) { return c.intra_link.latency_s; });
  out.inter_link.bandwidth_bytes_per_s = median_of([](const Cluster& c) { return c.inter_link.bandwidth_bytes_per_s; });
  out.inter_link.latency_s = median_of([](const Cluster& c) { return c.inter_link.latency_s; });
  out.host.link_bandwidth_bytes_per_s = median_of([](const Cluster& c) { return c.host.link_bandwidth_bytes_per_s; });
  out.host.link_latency_s = median_of([](const Cluster& c) { return c.host.link_latency_s; });
  out.host.reduce_bytes_per_s = median_of([](const Cluster& c) { return c.host.reduce_bytes_per_s; });
  out.collective.reduce_bytes_per_s = median_of([](const Cluster& c) { return c.collective.reduce_bytes_per_s; });
  out.collective.sync_s = median_of([](const Cluster& c) { return c.collective.sync_s; });
  out.collective.pack_bytes_per_s = median_of([](const Cluster& c) { return c.collective.pack_bytes_per_s; });
  out.collective.pack_latency_s = median_of([](const Cluster& c) { return c.collective.pack_latency_s; });
  out.collective.hop_bytes_per_s = median_of([](const Cluster& c) { return c.collective.hop_bytes_per_s; });
  if (out.collective.hop_latency_s) {
    out.collective.hop_latency_s =
        median_of([](const Cluster& c) { return c.collective.hop_latency_s.value_or(c.intra_link.latency_s); });
  }
  // The library's hops where every probe measured them (one NCCL failed
  // in leaves them out).
  const auto measured_library = [](const Cluster& c) { return c.collective.library.has_value(); };
  out.collective.library.reset();
  if (std::all_of(clusters.begin(), clusters.end(), measured_library)) {
    out.collective.library =
        CollectiveSpec::LibraryHops{median_of([](const Cluster& c) { return c.collective.library->hop_bytes_per_s; }),
                                    median_of([](const Cluster& c) { return c.collective.library->hop_latency_s; })};
  }
  out.link_kernel_s_per_byte = median_of([](const Cluster& c) { return c.link_kernel_s_per_byte; });
  for (CodecRates CollectiveSpec::*codec : {&CollectiveSpec::trunc16, &CollectiveSpec::quant8}) {
    (out.collective.*codec).encode_bytes_per_s =
        median_of([&](const Cluster& c) { return (c.collective.*codec).encode_bytes_per_s; });
    (out.collective.*codec).decode_bytes_per_s =
        median_of([&](const Cluster& c) { return (c.collective.*codec).decode_bytes_per_s; });
  }
  return out;
}

ClusterProbeOptions probe_options_for(const Profile& profile) {
  ClusterProbeOptions o;
  o.pack_bytes = std::max<int64_t>(4, std::llround(total_param_bytes(profile)));
  o.update_bytes = o.pack_bytes;
  return o;
}

Cluster measure_cpu_cluster(int64_t workers, const ClusterProbeOptions& options) {
  check_probe_options(workers, options);
  Cluster c;
  c.name = "cpu" + std::to_string(workers) + "-measured";
  c.machines = 1;
  c.devices_per_machine = workers;
  c.device.name = cpu_model_name();
  c.device.kind = "cpu";
  c.device.memory_bytes = total_memory_bytes() / static_cast<double>(workers);
  const auto together = [&] {
    if (options.together) options.together();
  };
  together();
  c.device.peak_flops_per_s = measure_gemm_flops_per_s(workers, options);
  together();
  c.device.memory_bytes_per_s = measure_update_bytes_per_s(workers, options);
  c.device.compute_rate_while_communicating = cpu_compute_rate_while_communicating(workers, usable_cores());
  together();
  c.device.handoff_s = measure_handoff_s(workers, options);
  together();
  ChannelFit channel = fit_channel(measure_channel(options));
  together();
  channel.latency_s = measure_message_latency_s(workers, options);
  c.intra_link = {channel.bandwidth_bytes_per_s, channel.latency_s};
  c.inter_link = c.intra_link;
  // A copy to or from the host: all workers at once, their whole gradient
  // (one worker too: a copy in its process's memory, not a message between
  // threads, which a busy core slows by its hand-offs).
  together();
  c.host.link_bandwidth_bytes_per_s = measure_concurrent_copy_bytes_per_s(workers, options.pack_bytes, options);
  c.host.link_latency_s = channel.latency_s;
  together();
  c.host.reduce_bytes_per_s = measure_reduce_bytes_per_s(1, options.reduce_bytes, options.repeats, options);
  c.host.threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  c.host.stream_sync_s = 0;
  together();
  c.collective.sync_s = measure_barrier_s(workers, options);
  together();
  c.collective.pack_bytes_per_s = measure_pack_bytes_per_s(workers, options);
  // A ring member's chunk: the packed gradient over the workers.
  const int64_t chunk_bytes = std::max<int64_t>(4, options.pack_bytes / workers);
  together();
  c.collective.trunc16 = measure_codec_rates(GradientCompression::kTrunc16, workers, chunk_bytes, options);
  together();
  c.collective.quant8 = measure_codec_rates(GradientCompression::kQuant8, workers, chunk_bytes, options);
  together();
  c.collective.reduce_bytes_per_s =
      workers > 1 ? measure_reduce_bytes_per_s(workers, chunk_bytes, options.pack_repeats, options)
                  : c.host.reduce_bytes_per_s;
  // Hops of at least 1 MiB, so the message's fixed cost (α, priced apart)
  // stays small beside its bytes.
  if (workers > 1) {
    together();
    c.collective.hop_bytes_per_s = measure_hop_bytes_per_s(workers, std::max<int64_t>(chunk_bytes, 1 << 20), options);
  }
  c.description = "measured on " + c.device.name + " with " + std::to_string(workers) +
                  " worker threads: GEMM " + std::to_string(options.gemm_size) + "^3, momentum-SGD update of " +
                  std::to_string(options.update_bytes) + " B, in-process ping-pong " +
                  std::to_string(options.min_message_bytes) + " B.." + std::to_string(options.max_message_bytes) +
                  " B (bandwidth: least-squares slope of the large ones), a message's path to asleep threads "
                  "(latency), packing of " +
                  std::to_string(options.pack_bytes) + " B of gradients, collective hops and sums of a ring chunk (" +
                  std::to_string(std::max<int64_t>(4, options.pack_bytes / workers)) +
                  " B) by every worker at once, hand-off to a communication thread";
  validate_cluster(c, "measured cluster " + c.name);
  return c;
}

void measure_host_collective(int64_t workers, int64_t gradient_bytes, const ClusterProbeOptions& o, CollectiveSpec& c) {
  check_probe_options(workers, o);
  TRAINSIM_CHECK(workers > 1 && gradient_bytes >= 4, "a host collective of two workers or more over some bytes");
  const int64_t chunk_bytes = std::max<int64_t>(4, gradient_bytes / workers);
  c.hop_bytes_per_s = measure_hop_bytes_per_s(workers, std::max<int64_t>(chunk_bytes, 1 << 20), o);
  c.hop_latency_s = measure_message_latency_s(workers, o);
  c.reduce_bytes_per_s = measure_reduce_bytes_per_s(workers, chunk_bytes, o.pack_repeats, o);
  c.sync_s = measure_barrier_s(workers, o);
}

}  // namespace trainsim
