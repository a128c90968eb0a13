// measure_sharing_rates: ring AllReduces over the workers' transport alone
// and beside GEMMs on every worker, and the GEMMs' rate with and without
// them (sharing_probe.hpp).
#include "profiles/profiler/sharing_probe.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <numeric>
#include <thread>

#include "exec/interpreter.hpp"
#include "exec/tensor/tensor.hpp"
#include "profiles/profiler/timing.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {
namespace {

// Tags of the probe's messages: its own range, apart from the interpreter's
// and transport_probe.cpp's.
constexpr int64_t kAllReduceTag = 31101;
constexpr int64_t kBarrierTag = 31103;
constexpr int64_t kRatesTag = 31105;

// What the compute thread is asked to do: wait, run GEMMs until told to
// stop, or leave.
enum class Load : int { kIdle, kRun, kQuit };

// Kernels per second between start() and stop(), on the compute thread.
struct ComputeLoad {
  std::atomic<int> state{static_cast<int>(Load::kIdle)};
  std::atomic<bool> started{false};
  std::atomic<bool> reported{false};
  double kernels_per_s = 0;

  void set(Load load) {
    state.store(static_cast<int>(load));
    state.notify_all();
  }
  // On the communication thread: returns once the GEMMs run (so that a
  // stop cannot come before the compute thread saw the start).
  void start() {
    started.store(false);
    set(Load::kRun);
    started.wait(false);
  }
  // On the compute thread: serves requests until kQuit.
  void serve() {
    const RowMajorMatrix a = RowMajorMatrix::Constant(kSharingKernelSize, kSharingKernelSize, 0.5f);
    const RowMajorMatrix b = RowMajorMatrix::Constant(kSharingKernelSize, kSharingKernelSize, 0.25f);
    RowMajorMatrix c = RowMajorMatrix::Zero(kSharingKernelSize, kSharingKernelSize);
    while (true) {
      state.wait(static_cast<int>(Load::kIdle));
      if (state.load() == static_cast<int>(Load::kQuit)) return;
      started.store(true);
      started.notify_all();
      int64_t kernels = 0;
      const double start_s = now_s();
      while (state.load(std::memory_order_relaxed) == static_cast<int>(Load::kRun)) {
        c.noalias() = a * b;
        ++kernels;
      }
      kernels_per_s = static_cast<double>(kernels) / std::max(now_s() - start_s, 1e-9);
      reported.store(true);
      reported.notify_all();
    }
  }
  // On the communication thread: stops the GEMMs and returns their rate.
  double stop() {
    reported.store(false);
    set(Load::kIdle);
    reported.wait(false);
    return kernels_per_s;
  }
};

}  // namespace

double ring_kernel_share(double link_kernel_s_per_byte, int64_t hosts, int64_t workers, double bytes, double seconds,
                         int64_t cores) {
  if (hosts < 2 || workers < 2 || seconds <= 0 || cores <= 0) return 0;
  // Each host's link carries one ring hop's traffic: the ring's β term at 1 s per byte (docs/equations.md §2).
  const double per_link = allreduce_s(CollectiveAlgorithm::kRing, bytes, workers, {0, 1, 0});
  const double kernel_cores = link_kernel_s_per_byte * static_cast<double>(hosts) * per_link / seconds;
  return std::clamp(kernel_cores / static_cast<double>(cores), 0.0, 1.0);
}

SharingRates measure_sharing_rates(Transport& t, int self, const ClusterProbeOptions& o) {
  const int workers = t.workers();
  if (workers < 2) return {};
  std::vector<int> everyone(static_cast<size_t>(workers));
  std::iota(everyone.begin(), everyone.end(), 0);
  const int64_t cores = usable_cores();
  std::vector<float> data(static_cast<size_t>(std::max<int64_t>(1, o.pack_bytes / 4)));
  ComputeLoad load;
  // The AllReduce's median time over the repeats, each after a barrier (the
  // sums reset first, so that no value grows past float's range).
  const auto time_all_reduces = [&](int64_t repeats) {
    std::vector<double> samples_s;
    for (int64_t r = 0; r < repeats; ++r) {
      std::fill(data.begin(), data.end(), 1.0f);
      t.barrier(self, everyone, kBarrierTag);
      const double start_s = now_s();
      t.all_reduce(self, everyone, kAllReduceTag, data, CollectiveAlgorithm::kRing);
      samples_s.push_back(now_s() - start_s);
    }
    return median_s(samples_s);
  };
  double alone_s = 0, busy_s = 0, idle_rate = 0, busy_rate = 0;
  run_threads(2, [&](int64_t thread, std::barrier<>& sync) {
    pin_current_thread(worker_thread_core(self, workers, cores, thread == 0));
    sync.arrive_and_wait();
    if (thread == 0) {
      load.serve();
      return;
    }
    try {
      time_all_reduces(o.warmups);
      alone_s = time_all_reduces(o.sharing_repeats);
      // As long with compute alone on every worker, then the AllReduces beside it.
      t.barrier(self, everyone, kBarrierTag);
      load.start();
      std::this_thread::sleep_for(std::chrono::duration<double>(alone_s * static_cast<double>(o.sharing_repeats)));
      idle_rate = load.stop();
      t.barrier(self, everyone, kBarrierTag);
      load.start();
      time_all_reduces(o.warmups);
      busy_s = time_all_reduces(o.sharing_repeats);
      busy_rate = load.stop();
    } catch (...) {
      load.set(Load::kQuit);
      throw;
    }
    load.set(Load::kQuit);
  });
  const float compute = idle_rate > 0 ? static_cast<float>(busy_rate / idle_rate) : 1.0f;
  const float collective = busy_s > 0 ? static_cast<float>(alone_s / busy_s) : 1.0f;
  if (self != 0) {
    t.send(self, 0, kRatesTag, {compute, collective, static_cast<float>(busy_s)});
    return {};
  }
  std::vector<double> computes{compute}, collectives{collective}, busy{busy_s};
  for (int w = 1; w < workers; ++w) {
    const std::vector<float> theirs = t.recv(0, w, kRatesTag);
    computes.push_back(theirs.at(0));
    collectives.push_back(theirs.at(1));
    busy.push_back(theirs.at(2));
  }
  return {std::clamp(median_s(computes), kMinSharingRate, 1.0), std::clamp(median_s(collectives), kMinSharingRate, 1.0),
          median_s(busy)};
}

}  // namespace trainsim
