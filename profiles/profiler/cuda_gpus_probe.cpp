// measure_cuda_gpus_cluster (cuda_cluster_probe.hpp): several GPUs, a
// worker each, as one machine's cluster.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_device_store.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "model/error.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"
#include "profiles/profiler/cuda_owners.hpp"
#include "profiles/profiler/cuda_pack_probe.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

std::string spelled(const std::vector<int>& gpus) {
  std::string s = "cuda:";
  for (size_t i = 0; i < gpus.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(gpus[i]);
  return s;
}

void check_gpus(const std::vector<int>& gpus) {
  const std::string name = "'" + spelled(gpus) + "'";
  if (gpus.size() < 2)
    throw InputError("--device", name + " names fewer than two GPUs", "two GPUs or more: cuda:G,H,...");
  if (std::set<int>(gpus.begin(), gpus.end()).size() != gpus.size()) {
    throw InputError("--device", name + " lists a GPU twice", "each GPU once (cuda:GxW: workers sharing one)");
  }
  if (static_cast<int64_t>(gpus.size()) > host_worker_threads()) {
    throw InputError(
        "--device",
        name + " asks for " + std::to_string(gpus.size()) + " workers, whose collectives run on as many host threads",
        "at most " + std::to_string(host_worker_threads()) + " GPUs here (4 per core)");
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    const std::string why = status != cudaSuccess ? cudaGetErrorString(status) : "the CUDA runtime reports no device";
    throw InputError("--device", name + ": no usable CUDA device: " + why, "a machine with GPUs and their driver");
  }
  for (const int gpu : gpus) {
    if (gpu < 0 || gpu >= count) {
      throw InputError("--device", name + ": this machine has " + std::to_string(count) + " CUDA devices",
                       "GPUs among cuda:0 to cuda:" + std::to_string(count - 1));
    }
  }
}

// A sweep of what one boundary from a worker on GPU `from` to one on GPU
// `to` costs, by the executor's path between them. Where they are peers:
// the sender's copy into an array of its store (Device::export_boundary),
// an event, the receiver's store's copy of it onto its GPU (DeviceStore::
// copy) and its network's copy into its input buffers. Else through the
// host: the sender's copy down into pageable memory, waited for
// (CudaNetwork::cut_values), and the receiver's copy of it into pinned
// memory and up into its input buffers, waited for here (where NCCL will
// not open: nccl_boundary_sweep).
std::vector<ChannelSample> boundary_sweep(int from, int to, const CudaProbeOptions& o, bool peers) {
  const size_t floats = static_cast<size_t>((o.max_message_bytes + 3) / 4);
  TRAINSIM_CUDA(cudaSetDevice(from));
  const probe::DeviceBuffer source = probe::device_floats(floats), via = probe::device_floats(floats);
  TRAINSIM_CUDA(cudaMemset(source.get(), 0, floats * sizeof(float)));
  const probe::Stream sender = probe::make_stream();
  const probe::Event exported = probe::make_event();
  const probe::HostBuffer pinned = probe::pinned_floats(floats);
  std::vector<float> pageable(floats);
  TRAINSIM_CUDA(cudaSetDevice(to));
  const probe::DeviceBuffer arrived = probe::device_floats(floats), input = probe::device_floats(floats);
  const probe::Stream receiver = probe::make_stream();
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  TRAINSIM_CUDA(cudaSetDevice(from));
  return wall_clock_sweep(o, [&](size_t size) {
    if (peers) {
      TRAINSIM_CUDA(cudaMemcpyAsync(via.get(), source.get(), size, cudaMemcpyDeviceToDevice, sender.get()));
      TRAINSIM_CUDA(cudaEventRecord(exported.get(), sender.get()));
      TRAINSIM_CUDA(cudaStreamWaitEvent(receiver.get(), exported.get(), 0));
      TRAINSIM_CUDA(cudaMemcpyPeerAsync(arrived.get(), to, via.get(), from, size, receiver.get()));
      TRAINSIM_CUDA(cudaMemcpyAsync(input.get(), arrived.get(), size, cudaMemcpyDeviceToDevice, receiver.get()));
      TRAINSIM_CUDA(cudaStreamSynchronize(receiver.get()));
      return;
    }
    TRAINSIM_CUDA(cudaMemcpyAsync(pageable.data(), source.get(), size, cudaMemcpyDeviceToHost, sender.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(sender.get()));
    std::copy_n(pageable.data(), size / sizeof(float), pinned.get());
    TRAINSIM_CUDA(cudaMemcpyAsync(input.get(), pinned.get(), size, cudaMemcpyHostToDevice, receiver.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(receiver.get()));
  });
}

// The same between GPUs that are not peers by the NCCL transport's path
// (its KeptPasser): the sender's copy into an array of its store, NCCL's
// send and receive on a communicator of the two into an array of the
// receiver's store, and the receiver's copy of that into its input
// buffers, waited for here. None, and `why_not` says why, where NCCL will
// not open or run here (the executor then goes through the host).
std::optional<std::vector<ChannelSample>> nccl_boundary_sweep(int from, int to, const CudaProbeOptions& o,
                                                              std::string& why_not) {
  why_not = nccl_library_error();
  if (!why_not.empty()) return std::nullopt;
  try {
    const std::shared_ptr<DeviceStore> sending = make_cuda_device_store(from);
    const std::shared_ptr<DeviceStore> receiving = make_cuda_device_store(to);
    const size_t floats = static_cast<size_t>((o.max_message_bytes + 3) / 4);
    TRAINSIM_CUDA(cudaSetDevice(from));
    const probe::DeviceBuffer source = probe::device_floats(floats);
    TRAINSIM_CUDA(cudaMemset(source.get(), 0, floats * sizeof(float)));
    const probe::Stream sender = probe::make_stream();
    TRAINSIM_CUDA(cudaSetDevice(to));
    const probe::DeviceBuffer input = probe::device_floats(floats);
    const probe::Stream receiver = probe::make_stream();
    // Made last, so gone first: a send left unmatched by a failure is
    // aborted with its communicator before the memory it reads is freed.
    const std::unique_ptr<Transport> transport = make_nccl_transport({from, to});
    transport->open_kept_paths({{0, 1}});
    int64_t tag = 0;
    return wall_clock_sweep(o, [&](size_t size) {
      const auto n = static_cast<int64_t>(size / sizeof(float));
      TRAINSIM_CUDA(cudaSetDevice(from));
      const ExportedBoundary out{sending, sending->uninitialized(n), from};
      auto& exported = dynamic_cast<cuda::KeptArray&>(*out.values);
      TRAINSIM_CUDA(cudaStreamWaitEvent(sender.get(), exported.written, 0));
      TRAINSIM_CUDA(cudaMemcpyAsync(exported.values.get(), source.get(), size, cudaMemcpyDeviceToDevice, sender.get()));
      TRAINSIM_CUDA(cudaEventRecord(exported.written, sender.get()));
      transport->pass_kept(0, 1, tag, out, n);
      const PassedKept passed = transport->take_kept(1, 0, tag++, [&](int64_t f) {
        return std::make_shared<ExportedBoundary>(ExportedBoundary{receiving, receiving->uninitialized(f), to});
      });
      auto& arrived = dynamic_cast<cuda::KeptArray&>(*passed.array->values);
      TRAINSIM_CUDA(cudaSetDevice(to));
      TRAINSIM_CUDA(cudaStreamWaitEvent(receiver.get(), arrived.written, 0));
      TRAINSIM_CUDA(cudaMemcpyAsync(input.get(), arrived.values.get(), size, cudaMemcpyDeviceToDevice, receiver.get()));
      TRAINSIM_CUDA(cudaEventRecord(arrived.written, receiver.get()));
      TRAINSIM_CUDA(cudaStreamSynchronize(receiver.get()));
    });
  } catch (const std::exception& e) {  // NCCL opened but would not run here
    why_not = e.what();
    return std::nullopt;
  }
}

// The timing of measure_nccl_hops: a member that fails aborts the
// transport, so the others stop waiting for it.
CollectiveSpec::LibraryHops time_nccl_hops(const std::vector<int>& gpus, int64_t gradient_bytes, int64_t small_bytes,
                                           double sync_s, const CudaProbeOptions& o) {
  const std::unique_ptr<Transport> transport = make_nccl_transport(gpus);
  const auto n = static_cast<int64_t>(gpus.size());
  std::vector<int> group(gpus.size());
  std::iota(group.begin(), group.end(), 0);
  std::vector<int64_t> calls(gpus.size(), 0);  // each member's AllReduces so far: their tags, alike on every member
  std::vector<std::shared_ptr<DeviceStore>> stores;
  for (const int gpu : gpus) stores.push_back(make_cuda_device_store(gpu));
  const auto timed = [&](int64_t bytes) {
    const auto floats = bytes / 4;
    // Each member's gradient kept on its GPU, as a worker's store keeps its sums.
    std::vector<std::shared_ptr<KeptValues>> values;
    for (const std::shared_ptr<DeviceStore>& store : stores) {
      values.push_back(store->from_host(std::vector<float>(static_cast<size_t>(floats), 1.0f)));
    }
    const double seconds = concurrent_median_s(n, o.warmups, o.repeats, [&](int64_t t) {
      const auto member = static_cast<size_t>(t);
      KeptValues* const arrays[] = {values[member].get()};
      try {
        transport->all_reduce_kept(static_cast<int>(t), group, calls[member]++, arrays, floats,
                                   1.0f / static_cast<float>(n));
      } catch (const std::exception& e) {
        transport->abort(std::string("a member of the NCCL probe failed: ") + e.what());
        throw;
      }
    });
    return ChannelSample{static_cast<double>(floats) * sizeof(float), seconds};
  };
  const ChannelSample small = timed(small_bytes);
  return fit_library_ring(n, small, timed(gradient_bytes), sync_s);
}

// NCCL's AllReduce over the GPUs as the executor's transport runs it on
// the gradients each worker's store keeps (Transport::all_reduce_kept: each
// member's arrays copied into one buffer on its GPU, summed by
// ncclAllReduce, scaled, copied back), every member at once, at 256 bytes and at
// gradient_bytes, as the library's ring hops (fit_library_ring). None, and
// `why_not` says why, where NCCL cannot be opened or will not run here, or
// the gradient is no larger than 256 bytes.
std::optional<CollectiveSpec::LibraryHops> measure_nccl_hops(const std::vector<int>& gpus, int64_t gradient_bytes,
                                                             double sync_s, const CudaProbeOptions& o,
                                                             std::string& why_not) {
  constexpr int64_t kSmallBytes = 256;
  why_not = nccl_library_error();
  if (!why_not.empty()) return std::nullopt;
  if (gradient_bytes <= kSmallBytes) {
    why_not = "a gradient of 256 B or less";
    return std::nullopt;
  }
  try {
    return time_nccl_hops(gpus, gradient_bytes, kSmallBytes, sync_s, o);
  } catch (const std::exception& e) {  // NCCL opened but would not run here (its communicators, shared memory)
    why_not = e.what();
    return std::nullopt;
  }
}

}  // namespace

Cluster measure_cuda_gpus_cluster(const std::vector<int>& gpus, const CudaProbeOptions& options) {
  check_gpus(gpus);
  const probe::CurrentDevice current(gpus.front());
  Cluster c = measure_cuda_cluster(gpus.front(), 1, options);
  const auto n = static_cast<int64_t>(gpus.size());
  c.name = "cuda" + std::to_string(n) + "gpus-measured";
  c.devices_per_machine = n;
  c.shared_devices = 0;
  const bool peers = peer_gpus(gpus[0], gpus[1]);
  std::string nccl_why_not;
  std::optional<std::vector<ChannelSample>> by_nccl;
  if (!peers) by_nccl = nccl_boundary_sweep(gpus[0], gpus[1], options, nccl_why_not);
  const ChannelFit link = fit_channel(by_nccl ? *by_nccl : boundary_sweep(gpus[0], gpus[1], options, peers));
  c.intra_link = {link.bandwidth_bytes_per_s, link.latency_s};
  c.inter_link = c.intra_link;
  // The workers' collectives on the host, each gradient copied down and up
  // on its own GPU (exec/interpreter/collective_ops.cpp).
  measure_host_collective(n, options.gradient_bytes, ClusterProbeOptions{}, c.collective);
  const ChannelFit packing = measure_cuda_packing(gpus, options.gradient_bytes, options);
  c.collective.pack_bytes_per_s = packing.bandwidth_bytes_per_s;
  c.collective.pack_latency_s = packing.latency_s;
  std::string why_not;
  c.collective.library = measure_nccl_hops(gpus, options.gradient_bytes, c.collective.sync_s, options, why_not);
  c.description = "GPU " + std::to_string(gpus[0]) + " alone (" + c.description + "), then " + spelled(gpus) +
                  " as a worker per GPU (the others taken to be as GPU " + std::to_string(gpus[0]) +
                  "): boundaries between GPUs " + std::to_string(gpus[0]) + " and " + std::to_string(gpus[1]) +
                  (peers ? " device to device (peers: an array copied on the sender's GPU, then onto the receiver's)"
                   : by_nccl ? " by NCCL's send and receive (no peer access)"
                             : " through pinned host memory (no peer access; NCCL's send and receive not measured: " +
                                   nccl_why_not + ")") +
                  "; collectives on the host (ring hops, sums and barriers of " + std::to_string(n) +
                  " threads) between each worker's gradient of " + std::to_string(options.gradient_bytes) +
                  " B copied down and up on its GPU, all at once; " +
                  (c.collective.library ? "the library AllReduce (algorithm=mpi) by NCCL's transport over the GPUs, "
                                          "of a gradient each GPU keeps, all at once, at 256 B and the gradient, "
                                          "as a ring's hops"
                                        : "NCCL's AllReduce (algorithm=mpi) not measured: " + why_not);
  validate_cluster(c, "measured cluster " + c.name);
  return c;
}

}  // namespace trainsim
