// The CUDA cluster probe on GPU 0: what it measures validates, lies within
// physical bounds and divides the GPU among its workers; bad arguments are
// InputErrors naming --device. Skipped, with the reason, without a GPU.
#include "profiles/profiler/cuda_cluster_probe.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/cuda_device_store.hpp"
#include "exec/cuda/nccl_transport.hpp"
#include "exec/devices.hpp"
#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/profiler/host_per_op.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

// Small enough to keep each probe under a few seconds on a current GPU,
// large enough that the GEMM and the copies fill it.
CudaProbeOptions quick_cuda_probe() {
  CudaProbeOptions o;
  o.repeats = 3;
  o.warmups = 1;
  o.gemm_size = 2048;
  o.copy_bytes = 64 << 20;
  o.max_message_bytes = 4 << 20;
  o.reduce_bytes = 16 << 20;
  o.sync_repeats = 50;
  o.gradient_bytes = 1 << 20;
  return o;
}

void expect_between(double value, double low, double high, const std::string& what) {
  EXPECT_TRUE(std::isfinite(value)) << what;
  EXPECT_GE(value, low) << what;
  EXPECT_LE(value, high) << what;
}

void expect_sane(const Cluster& c, int64_t workers) {
  SCOPED_TRACE(c.name);
  EXPECT_NO_THROW(validate_cluster(c, "measured"));
  EXPECT_EQ(c.name, "cuda" + std::to_string(workers) + "-measured");
  EXPECT_EQ(c.machines, 1);
  EXPECT_EQ(c.devices_per_machine, workers);
  EXPECT_EQ(c.device.kind, "gpu");
  EXPECT_FALSE(c.device.name.empty());
  EXPECT_FALSE(c.description.empty());
  EXPECT_GT(c.device.memory_bytes, 0);
  expect_between(c.device.peak_flops_per_s, 1e11, 1e15, "device.peak_flops_per_s");
  expect_between(c.device.memory_bytes_per_s, 1e10, 1e13, "device.memory_bytes_per_s");
  EXPECT_EQ(c.device.compute_rate_while_communicating, 1);
  EXPECT_EQ(c.device.handoff_s, 0);
  for (const LinkSpec& link : {c.intra_link, c.inter_link}) {
    EXPECT_TRUE(std::isfinite(link.bandwidth_bytes_per_s));
    EXPECT_GT(link.bandwidth_bytes_per_s, 0);
    expect_between(link.latency_s, 1e-7, 1e-2, "link latency_s");
  }
  expect_between(c.host.link_bandwidth_bytes_per_s, 1e8, 1e12, "host.link_bandwidth_bytes_per_s");
  expect_between(c.host.link_latency_s, 1e-7, 1e-2, "host.link_latency_s");
  EXPECT_TRUE(std::isfinite(c.host.reduce_bytes_per_s));
  EXPECT_GT(c.host.reduce_bytes_per_s, 0);
  EXPECT_GE(c.host.threads, 1);
  expect_between(c.host.stream_sync_s, 1e-7, 1e-2, "host.stream_sync_s");
  EXPECT_TRUE(std::isfinite(c.collective.reduce_bytes_per_s));
  EXPECT_GT(c.collective.reduce_bytes_per_s, 0);
  expect_between(c.collective.sync_s, 1e-7, 1e-2, "collective.sync_s");
  if (workers == 1) {
    EXPECT_EQ(c.collective.pack_bytes_per_s, 0);
    EXPECT_EQ(c.collective.pack_latency_s, 0);
    EXPECT_EQ(c.collective.hop_bytes_per_s, 0);
    EXPECT_FALSE(c.collective.hop_latency_s.has_value());
    return;
  }
  // The workers' collectives run on the host, between copies of their
  // gradients down and up: the packing, which copies each byte down and
  // up, is slower than a pinned copy one way, and a hop in host memory
  // slower than a boundary's device copies.
  expect_between(c.collective.pack_bytes_per_s, 1e6, c.host.link_bandwidth_bytes_per_s, "collective.pack_bytes_per_s");
  // Its fixed part waits for a copy down and one up, each a round trip to
  // the GPU as a launch and its synchronization are: well under a
  // millisecond (0 where the fit's intercept fell below zero on noise, as
  // fit_packing then gives).
  expect_between(c.collective.pack_latency_s, 0, 1e-3, "collective.pack_latency_s");
  expect_between(c.collective.hop_bytes_per_s, 1e6, c.intra_link.bandwidth_bytes_per_s, "collective.hop_bytes_per_s");
  ASSERT_TRUE(c.collective.hop_latency_s.has_value());
  expect_between(*c.collective.hop_latency_s, 1e-7, 1e-2, "collective.hop_latency_s");
}

TEST(CudaClusterProbe, MeasuresGpuZeroAndSharesItAmongItsWorkers) {
  SKIP_WITHOUT_GPU();
  const Cluster one = measure_cuda_cluster(0, 1, quick_cuda_probe());
  const Cluster four = measure_cuda_cluster(0, 4, quick_cuda_probe());
  expect_sane(one, 1);
  expect_sane(four, 4);
  EXPECT_NEAR(four.device.memory_bytes, one.device.memory_bytes / 4, one.device.memory_bytes * 1e-9);
  // A worker's rates are the GPU's alone (the simulator shares them): four
  // workers' as one's, within the noise of two measurements.
  EXPECT_NEAR(four.device.peak_flops_per_s / one.device.peak_flops_per_s, 1.0, 0.3);
  EXPECT_NEAR(four.device.memory_bytes_per_s / one.device.memory_bytes_per_s, 1.0, 0.3);
  EXPECT_EQ(four.device.name, one.device.name);
  EXPECT_EQ(one.shared_devices, 0);  // a worker alone has its GPU
  EXPECT_EQ(four.shared_devices, 1);
}

// A worker's host time per compute op on GPU 0, through the executor's
// single plan of fmnist-cnn on two workers at once: every kind takes some of the host (its calls
// into CUDA, cuBLAS and cuDNN alone are microseconds each), and none
// anything near a second.
TEST(CudaClusterProbe, MeasuresAWorkersHostTimePerComputeOpThroughTheExecutor) {
  SKIP_WITHOUT_GPU();
  MeasureOptions options;
  options.warmups = 3;
  options.repeats = 10;
  const Model model = build_zoo_model("fmnist-cnn");
  const DeviceSpec::HostPerOp host = measure_host_per_op(
      model, 64, 2, [&](int32_t) { return make_cuda_device(model, 0, CudaPrecision::fast); }, options);
  expect_between(host.forward.seconds(1), 1e-6, 0.1, "host_per_op.forward at one layer");
  expect_between(host.backward.seconds(1), 1e-6, 0.1, "host_per_op.backward at one layer");
  expect_between(host.update.seconds(10), 1e-6, 0.1, "host_per_op.update at ten layers");
  Cluster c = cluster_presets().front();
  c.device.host_per_op = host;
  EXPECT_NO_THROW(validate_cluster(c, "measured"));
}

TEST(CudaClusterProbe, RejectsAnUnknownDeviceAndWorkerCountsOutOfRange) {
  // InputErrors with or without a GPU (and in a build without CUDA).
  const struct {
    int device;
    int64_t workers;
  } cases[] = {{-1, 1}, {1 << 20, 1}, {0, 0}, {0, -3}, {0, kMaxCudaWorkers + 1}};
  for (const auto& bad : cases) {
    try {
      measure_cuda_cluster(bad.device, bad.workers, quick_cuda_probe());
      FAIL() << "no error for cuda:" << bad.device << "x" << bad.workers;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--device") << e.what();
    }
  }
}

TEST(CudaClusterProbe, SeveralGpusNeedTwoOrMoreEachOnceAndPresent) {
  // InputErrors with or without GPUs (and in a build without CUDA).
  for (const std::vector<int>& bad : {std::vector<int>{0}, {0, 0}, {0, 1 << 20}, {}}) {
    try {
      measure_cuda_gpus_cluster(bad, quick_cuda_probe());
      FAIL() << "no error for " << bad.size() << " GPUs";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--device") << e.what();
    }
  }
}

// GPUs 0 and 1, a worker each: one machine of two unshared GPUs, GPU 0's
// rates as measured alone, a boundary between them and the collectives
// on the host measured. Skipped without two GPUs.
TEST(CudaClusterProbe, MeasuresTwoGpusAsOneMachineOfTwoWorkers) {
  SKIP_WITHOUT_GPU();
  std::string reason;
  if (list_cuda_devices(reason).size() < 2) GTEST_SKIP() << "needs two GPUs";
  const Cluster gpus = measure_cuda_gpus_cluster({0, 1}, quick_cuda_probe());
  EXPECT_EQ(gpus.machines, 1);
  EXPECT_EQ(gpus.devices_per_machine, 2);
  EXPECT_EQ(gpus.shared_devices, 0);
  EXPECT_GT(gpus.intra_link.bandwidth_bytes_per_s, 0);
  EXPECT_GT(gpus.collective.hop_bytes_per_s, 0);
  EXPECT_GT(gpus.collective.pack_bytes_per_s, 0);
  EXPECT_NE(gpus.description.find(peer_gpus(0, 1) ? "device to device" : "through pinned host memory"),
            std::string::npos)
      << gpus.description;
  if (nccl_library_error().empty()) {  // NCCL's AllReduce as a ring's hops
    ASSERT_TRUE(gpus.collective.library) << gpus.description;
    EXPECT_GT(gpus.collective.library->hop_bytes_per_s, 0);
    EXPECT_GE(gpus.collective.library->hop_latency_s, 0);
  }
}

}  // namespace
}  // namespace trainsim
