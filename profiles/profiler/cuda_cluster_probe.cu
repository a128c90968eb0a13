// measure_cuda_cluster: one GPU's compute, memory, copy and launch costs,
// timed with CUDA events and cuBLAS, as a cluster of workers sharing it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/devices.hpp"
#include "model/error.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"
#include "profiles/profiler/cuda_owners.hpp"
#include "profiles/profiler/cuda_pack_probe.hpp"

namespace trainsim {
namespace {

using probe::device_floats;
using probe::DeviceBuffer;
using probe::Event;
using probe::HostBuffer;
using probe::make_event;
using probe::make_stream;
using probe::pinned_floats;
using probe::Stream;
using Blas = std::unique_ptr<cublasContext, probe::Release<cublasDestroy>>;

// Floats that hold `bytes`, rounded up.
size_t floats_of(int64_t bytes) { return static_cast<size_t>(std::max<int64_t>(1, (bytes + 3) / 4)); }

// `count` buffers of `floats` zeros.
std::vector<DeviceBuffer> zeroed_buffers(int64_t count, size_t floats) {
  std::vector<DeviceBuffer> buffers;
  for (int64_t i = 0; i < count; ++i) {
    buffers.push_back(device_floats(floats));
    TRAINSIM_CUDA(cudaMemset(buffers.back().get(), 0, floats * sizeof(float)));
  }
  return buffers;
}

__global__ void fill_kernel(float* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const unsigned h = (static_cast<unsigned>(i) ^ seed) * 2654435761u;
    x[i] = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f;  // in [-0.5, 0.5)
  }
}

__global__ void add_kernel(float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    a[i] += b[i];
  }
}

__global__ void empty_kernel() {}

constexpr unsigned kBlock = 256;

// Grid of a grid-stride kernel over n floats: enough blocks to fill the GPU.
unsigned grid_for(size_t n, int sms) {
  const size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::min<size_t>(blocks, static_cast<size_t>(sms) * 32));
}

double median_of(std::vector<double> samples_s) {
  TRAINSIM_CHECK(!samples_s.empty(), "a median of no samples");
  std::sort(samples_s.begin(), samples_s.end());
  const size_t mid = samples_s.size() / 2;
  return samples_s.size() % 2 ? samples_s[mid] : (samples_s[mid - 1] + samples_s[mid]) / 2;
}

double steady_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of work(worker, stream) issued on `workers` streams at once:
// the streams fork from a start event and join into a stop event.
double streams_median_s(int64_t workers, const CudaProbeOptions& o,
                        const std::function<void(size_t worker, cudaStream_t stream)>& work) {
  const Stream launch = make_stream();
  std::vector<Stream> streams;
  std::vector<Event> done;
  for (int64_t w = 0; w < workers; ++w) {
    streams.push_back(make_stream());
    done.push_back(make_event());
  }
  const Event start = make_event(), stop = make_event();
  TRAINSIM_CUDA(cudaDeviceSynchronize());  // the buffers' set-up on the default stream
  std::vector<double> samples_s;
  for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
    TRAINSIM_CUDA(cudaEventRecord(start.get(), launch.get()));
    for (size_t w = 0; w < streams.size(); ++w) {
      TRAINSIM_CUDA(cudaStreamWaitEvent(streams[w].get(), start.get(), 0));
      work(w, streams[w].get());
      TRAINSIM_CUDA(cudaEventRecord(done[w].get(), streams[w].get()));
      TRAINSIM_CUDA(cudaStreamWaitEvent(launch.get(), done[w].get(), 0));
    }
    TRAINSIM_CUDA(cudaEventRecord(stop.get(), launch.get()));
    TRAINSIM_CUDA(cudaEventSynchronize(stop.get()));
    float ms = 0;
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (r >= o.warmups) samples_s.push_back(ms * 1e-3);
  }
  return median_of(samples_s);
}

// Per-worker SGEMM rate, `workers` n×n×n products at once: each worker has
// its own handle, stream and output; the inputs are shared (read only).
double measure_gemm_flops_per_s(int64_t workers, int sms, const CudaProbeOptions& o) {
  const int n = static_cast<int>(o.gemm_size);
  const size_t floats = static_cast<size_t>(n) * static_cast<size_t>(n);
  const DeviceBuffer a = device_floats(floats), b = device_floats(floats);
  fill_kernel<<<grid_for(floats, sms), kBlock>>>(a.get(), floats, 1u);
  fill_kernel<<<grid_for(floats, sms), kBlock>>>(b.get(), floats, 2u);
  TRAINSIM_CUDA(cudaGetLastError());
  const std::vector<DeviceBuffer> c = zeroed_buffers(workers, floats);
  std::vector<Blas> handles;
  for (int64_t w = 0; w < workers; ++w) {
    cublasHandle_t h = nullptr;
    TRAINSIM_CUBLAS(cublasCreate(&h));
    handles.push_back(Blas(h));
    TRAINSIM_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // fp32 arithmetic, no TF32
  }
  const float alpha = 1, beta = 0;
  const double seconds = streams_median_s(workers, o, [&](size_t w, cudaStream_t stream) {
    TRAINSIM_CUBLAS(cublasSetStream(handles[w].get(), stream));
    TRAINSIM_CUBLAS(cublasSgemm(handles[w].get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), n, b.get(),
                                      n, &beta, c[w].get(), n));
  });
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / seconds;
}

// Per-worker copy rate, read + write, `workers` device-to-device copies at once.
double measure_copy_bytes_per_s(int64_t workers, const CudaProbeOptions& o) {
  const size_t floats = floats_of(o.copy_bytes);
  const std::vector<DeviceBuffer> from = zeroed_buffers(workers, floats), to = zeroed_buffers(workers, floats);
  const double seconds = streams_median_s(workers, o, [&](size_t w, cudaStream_t stream) {
    TRAINSIM_CUDA(
        cudaMemcpyAsync(to[w].get(), from[w].get(), floats * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * static_cast<double>(floats * sizeof(float)) / seconds;
}

// Per-worker rate of a += b on the GPU, in bytes of one buffer, `workers` at once.
double measure_device_reduce_bytes_per_s(int64_t workers, int sms, const CudaProbeOptions& o) {
  const size_t floats = floats_of(o.reduce_bytes);
  const std::vector<DeviceBuffer> a = zeroed_buffers(workers, floats), b = zeroed_buffers(workers, floats);
  const double seconds = streams_median_s(workers, o, [&](size_t w, cudaStream_t stream) {
    add_kernel<<<grid_for(floats, sms), kBlock, 0, stream>>>(a[w].get(), b[w].get(), floats);
    TRAINSIM_CUDA(cudaGetLastError());
  });
  return static_cast<double>(floats * sizeof(float)) / seconds;
}

// A sweep of cudaMemcpyAsync(to, from) of min..max bytes (×4), each copy
// timed alone with events on one stream.
std::vector<ChannelSample> measure_copy_sweep(void* to, const void* from, cudaMemcpyKind kind,
                                              const CudaProbeOptions& o) {
  const Stream stream = make_stream();
  const Event start = make_event(), stop = make_event();
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  std::vector<ChannelSample> samples;
  for (int64_t bytes = o.min_message_bytes; bytes <= o.max_message_bytes; bytes *= 4) {
    std::vector<double> samples_s;
    for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
      TRAINSIM_CUDA(cudaEventRecord(start.get(), stream.get()));
      TRAINSIM_CUDA(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), kind, stream.get()));
      TRAINSIM_CUDA(cudaEventRecord(stop.get(), stream.get()));
      TRAINSIM_CUDA(cudaEventSynchronize(stop.get()));
      float ms = 0;
      TRAINSIM_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      if (r >= o.warmups) samples_s.push_back(ms * 1e-3);
    }
    samples.push_back({static_cast<double>(bytes), median_of(samples_s)});
  }
  return samples;
}

// Seconds of one a += b over `floats` on `threads` threads, each summing its
// slice: from their common start to the last one's end.
double time_host_sum_s(float* a, const float* b, size_t floats, unsigned threads) {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  const size_t slice = (floats + threads - 1) / threads;
  const auto sum = [&](unsigned t) {
    const size_t begin = std::min(floats, t * slice), end = std::min(floats, begin + slice);
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
    for (size_t i = begin; i < end; ++i) a[i] += b[i];
  };
  try {
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(sum, t);
  } catch (...) {
    go.store(true);
    for (std::thread& thread : pool) thread.join();
    throw;
  }
  while (ready.load() < threads) std::this_thread::yield();
  const double start_s = steady_s();
  go.store(true);
  for (std::thread& thread : pool) thread.join();
  return steady_s() - start_s;
}

double measure_host_reduce_bytes_per_s(unsigned threads, const CudaProbeOptions& o) {
  const size_t floats = floats_of(o.reduce_bytes);
  std::vector<float> a(floats, 1.0f), b(floats, 1e-3f);
  std::vector<double> samples_s;
  for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
    const double seconds = time_host_sum_s(a.data(), b.data(), floats, threads);
    if (r >= o.warmups) samples_s.push_back(seconds);
  }
  return static_cast<double>(floats * sizeof(float)) / median_of(samples_s);
}

// Wall time of an empty kernel's launch and the stream's synchronization.
double measure_launch_sync_s(const CudaProbeOptions& o) {
  const Stream stream = make_stream();
  std::vector<double> samples_s;
  for (int64_t r = 0; r < o.warmups + o.sync_repeats; ++r) {
    const double start_s = steady_s();
    empty_kernel<<<1, 1, 0, stream.get()>>>();
    TRAINSIM_CUDA(cudaGetLastError());
    TRAINSIM_CUDA(cudaStreamSynchronize(stream.get()));
    if (r >= o.warmups) samples_s.push_back(steady_s() - start_s);
  }
  return median_of(samples_s);
}

// A sweep of what one boundary between two of the executor's workers on
// this GPU costs: copied from one buffer into an array on the sender's
// stream (Device::export_boundary) and, after an event, from the array into
// another buffer on the receiver's (the receiver's range input), each
// message timed alone by the wall clock until the receiver's copy is done.
std::vector<ChannelSample> measure_device_path_sweep(float* to, float* via, const float* from,
                                                     const CudaProbeOptions& o) {
  const Stream sender = make_stream(), receiver = make_stream();
  const Event exported = make_event();
  return wall_clock_sweep(o, [&](size_t size) {
    TRAINSIM_CUDA(cudaMemcpyAsync(via, from, size, cudaMemcpyDeviceToDevice, sender.get()));
    TRAINSIM_CUDA(cudaEventRecord(exported.get(), sender.get()));
    TRAINSIM_CUDA(cudaStreamWaitEvent(receiver.get(), exported.get(), 0));
    TRAINSIM_CUDA(cudaMemcpyAsync(to, via, size, cudaMemcpyDeviceToDevice, receiver.get()));
    TRAINSIM_CUDA(cudaStreamSynchronize(receiver.get()));
  });
}

// intra_link = inter_link: a boundary between workers on the GPU, device
// to device (measure_device_path_sweep); the host link: the slower
// direction of pinned host copies.
void measure_links(Cluster& c, const CudaProbeOptions& o) {
  const size_t message_floats = floats_of(o.max_message_bytes);
  const std::vector<DeviceBuffer> messages = zeroed_buffers(3, message_floats);
  float* const from = messages[0].get();
  float* const to = messages[1].get();
  const ChannelFit link = fit_channel(measure_device_path_sweep(to, messages[2].get(), from, o));
  c.intra_link = {link.bandwidth_bytes_per_s, link.latency_s};
  c.inter_link = c.intra_link;
  const HostBuffer pinned = pinned_floats(message_floats);
  std::fill(pinned.get(), pinned.get() + message_floats, 1.0f);
  const ChannelFit up = fit_channel(measure_copy_sweep(to, pinned.get(), cudaMemcpyHostToDevice, o));
  const ChannelFit down = fit_channel(measure_copy_sweep(pinned.get(), from, cudaMemcpyDeviceToHost, o));
  c.host.link_bandwidth_bytes_per_s = std::min(up.bandwidth_bytes_per_s, down.bandwidth_bytes_per_s);
  c.host.link_latency_s = std::max(up.latency_s, down.latency_s);
}

// "256 MiB" for whole MiB, else "4096 B".
std::string size_text(int64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " B";
}

void check_arguments(int device, int64_t workers, const CudaProbeOptions& o) {
  const std::string spelled = "cuda:" + std::to_string(device) + (workers == 1 ? "" : "x" + std::to_string(workers));
  if (workers < 1 || workers > kMaxCudaWorkers) {
    throw InputError("--device", "'" + spelled + "' asks for " + std::to_string(workers) + " workers",
                     "cuda:N or cuda:NxW with 1 <= W <= " + std::to_string(kMaxCudaWorkers));
  }
  if (workers > host_worker_threads()) {
    throw InputError("--device",
                     "'" + spelled + "' asks for " + std::to_string(workers) +
                         " workers, whose collectives run on as many host threads",
                     "at most " + std::to_string(host_worker_threads()) + " workers here (4 per core)");
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    const std::string why = status != cudaSuccess ? cudaGetErrorString(status) : "the CUDA runtime reports no device";
    throw InputError("--device", "'" + spelled + "': no usable CUDA device: " + why,
                     "a machine with a GPU and its driver");
  }
  if (device < 0 || device >= count) {
    throw InputError("--device", "'" + spelled + "': this machine has " + std::to_string(count) + " CUDA devices",
                     "cuda:0 to cuda:" + std::to_string(count - 1));
  }
  const bool ok = o.repeats >= 1 && o.warmups >= 0 && o.gemm_size >= 1 && o.gemm_size <= 32768 && o.copy_bytes >= 4 &&
                  o.min_message_bytes >= 4 && o.max_message_bytes >= o.min_message_bytes && o.reduce_bytes >= 4 &&
                  o.sync_repeats >= 1 && o.gradient_bytes >= 4;
  TRAINSIM_CHECK(ok, "CUDA probe options out of range");
}

}  // namespace

std::vector<ChannelSample> wall_clock_sweep(const CudaProbeOptions& o, const std::function<void(size_t)>& message) {
  TRAINSIM_CUDA(cudaDeviceSynchronize());
  std::vector<ChannelSample> samples;
  for (int64_t bytes = o.min_message_bytes; bytes <= o.max_message_bytes; bytes *= 4) {
    std::vector<double> samples_s;
    for (int64_t r = 0; r < o.warmups + o.repeats; ++r) {
      const double start_s = steady_s();
      message(static_cast<size_t>(bytes));
      if (r >= o.warmups) samples_s.push_back(steady_s() - start_s);
    }
    samples.push_back({static_cast<double>(bytes), median_of(samples_s)});
  }
  return samples;
}

Cluster measure_cuda_cluster(int device, int64_t workers, const CudaProbeOptions& options) {
  check_arguments(device, workers, options);
  const probe::CurrentDevice current(device);
  cudaDeviceProp prop{};
  TRAINSIM_CUDA(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  TRAINSIM_CUDA(cudaRuntimeGetVersion(&runtime));
  TRAINSIM_CUDA(cudaDriverGetVersion(&driver));
  const int sms = std::max(1, prop.multiProcessorCount);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());

  Cluster c;
  c.name = "cuda" + std::to_string(workers) + "-measured";
  c.machines = 1;
  c.devices_per_machine = workers;
  c.shared_devices = workers > 1 ? 1 : 0;  // the workers are virtual: one GPU
  c.device.name = prop.name;
  c.device.kind = "gpu";
  c.device.memory_bytes = static_cast<double>(prop.totalGlobalMem) / static_cast<double>(workers);
  // A worker alone: the simulator shares the GPU among those computing at once.
  c.device.peak_flops_per_s = measure_gemm_flops_per_s(1, sms, options);
  c.device.memory_bytes_per_s = measure_copy_bytes_per_s(1, options);
  c.device.compute_rate_while_communicating = 1;
  c.device.handoff_s = 0;

  measure_links(c, options);
  c.host.reduce_bytes_per_s = measure_host_reduce_bytes_per_s(threads, options);
  c.host.threads = threads;
  c.host.stream_sync_s = measure_launch_sync_s(options);
  if (workers > 1) {
    // The workers' collectives run on the host between their gradients'
    // copies down and up (exec/interpreter/collective_ops.cpp).
    measure_host_collective(workers, options.gradient_bytes, ClusterProbeOptions{}, c.collective);
    const ChannelFit packing = measure_cuda_packing(device, workers, options.gradient_bytes, options);
    c.collective.pack_bytes_per_s = packing.bandwidth_bytes_per_s;
    c.collective.pack_latency_s = packing.latency_s;
  } else {
    c.collective.reduce_bytes_per_s = measure_device_reduce_bytes_per_s(workers, sms, options);
    c.collective.sync_s = c.host.stream_sync_s;
    c.collective.pack_bytes_per_s = 0;
    c.collective.pack_latency_s = 0;
  }

  c.description =
      "measured on " + c.device.name + " (" + std::to_string(sms) + " SMs, CUDA runtime " + cuda_version_text(runtime) +
      ", driver " + cuda_version_text(driver) + ") as " + std::to_string(workers) +
      (workers == 1 ? " worker" : " workers") + " sharing it: fp32 SGEMM n=" + std::to_string(options.gemm_size) +
      " with TF32 off and device copies of " + size_text(options.copy_bytes) +
      " by a worker alone (the simulator shares the GPU among the workers computing at once); workers' boundaries (two "
      "device copies and an " +
      "event: the executor's path) and pinned host copies " + size_text(options.min_message_bytes) + ".." +
      size_text(options.max_message_bytes) +
      " (latency: smallest message; bandwidth: least-squares slope of the large ones); a += b over " +
      size_text(options.reduce_bytes) + " on the GPU and on " + std::to_string(threads) +
      " host threads; empty-kernel launch and sync (NCCL's fixed cost not measured)" +
      (workers > 1 ? "; collectives as the workers run them: on the host (ring hops, sums and barriers of " +
                         std::to_string(workers) + " threads) between each worker's gradient of " +
                         std::to_string(options.gradient_bytes) + " B copied down and up, all at once"
                   : std::string());
  validate_cluster(c, "measured cluster " + c.name);
  return c;
}

}  // namespace trainsim
