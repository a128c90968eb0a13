// The command line's value parsers (options.hpp).
#include "tools/options.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "exec/cuda/nccl_transport.hpp"
#include "exec/devices.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {

SimOptions parse_sim_options(const std::string& straggler, double jitter, uint64_t seed) {
  SimOptions options;
  options.seed = seed;
  options.jitter = jitter;
  if (!straggler.empty()) {
    const auto colon = straggler.find(':');
    const std::string expected = "PROB:SLOWDOWN with 0 <= PROB <= 1 and 1 <= SLOWDOWN <= " +
                                 format_number(kMaxStragglerSlowdown) + ", e.g. 0.33:1.5";
    if (colon == std::string::npos) throw InputError("--straggler", "'" + straggler + "'", expected);
    options.straggler_probability = parse_number(straggler.substr(0, colon), "--straggler");
    options.straggler_slowdown = parse_number(straggler.substr(colon + 1), "--straggler");
    if (!(options.straggler_probability >= 0 && options.straggler_probability <= 1 &&
          options.straggler_slowdown >= 1 && options.straggler_slowdown <= kMaxStragglerSlowdown)) {
      throw InputError("--straggler", "'" + straggler + "'", expected);
    }
  }
  return options;
}

// "cpu:N" -> N worker threads.
int64_t parse_cpu_devices(const std::string& text) {
  const std::string prefix = "cpu:";
  if (text == "cpu") return 1;
  if (text.rfind(prefix, 0) == 0) {
    const double n = parse_number(text.substr(prefix.size()), "--devices");
    if (n > static_cast<double>(max_worker_threads())) {
      throw InputError("--devices", "'" + text + "' asks for more threads than this machine runs well",
                       "at most cpu:" + std::to_string(max_worker_threads()) + ", 4 threads per core and never over " +
                           std::to_string(kMaxWorkerThreads));
    }
    if (n >= 1 && n == static_cast<double>(static_cast<int64_t>(n))) return static_cast<int64_t>(n);
  }
  if (text.rfind("cuda", 0) == 0) {
    throw InputError("--devices", "'" + text + "': GPU workers run under trainsim run; this command runs CPU workers",
                     "cpu:N");
  }
  throw InputError("--devices", "'" + text + "'", "cpu:N with N >= 1 worker threads");
}

std::shared_ptr<MemoryBudget> gpu_worker_budget(const GpuDevice& gpu, int32_t worker, int64_t sharing) {
  const int device = gpu.each.empty() ? gpu.index : gpu.each.at(static_cast<size_t>(worker));
  const std::string name = "cuda:" + std::to_string(device);
  if (sharing <= 0) sharing = gpu.each.empty() ? gpu.workers : 1;
  const std::string owner = "worker " + std::to_string(worker);
  if (sharing <= 1) return std::make_shared<MemoryBudget>(owner + " on " + name, -1);
  double memory = 0;
  std::string reason;
  for (const LocalDevice& d : list_cuda_devices(reason)) memory = d.id == name ? d.memory_bytes : memory;
  const std::string s = std::to_string(sharing);
  return std::make_shared<MemoryBudget>(
      owner + ", one of " + s + " sharing " + name, memory > 0 ? static_cast<int64_t>(memory) / sharing : -1,
      "1/" + s + " of " + name + "'s " + format_bytes(memory) + ", as on " + s +
          " GPUs of that size (fewer workers on the GPU, a smaller batch, or fewer micro-batches in flight)");
}

GpuDevice parse_gpu_device(const std::string& device, const std::string& flag) {
  const char* expected = "cuda, cuda:N, cuda:NxW (W workers sharing GPU N, 1 to 64) or cuda:N,M,... (a worker on each)";
  GpuDevice gpu;
  if (device == "cuda") return gpu;
  if (device.rfind("cuda:", 0) == 0 && device.find(',') != std::string::npos) {
    std::vector<std::string> items{""};
    for (const char c : device.substr(5)) {
      if (c == ',') {
        items.emplace_back();
      } else {
        items.back() += c;
      }
    }
    for (const std::string& item : items) {
      int index = -1;
      const auto [at, error] = std::from_chars(item.data(), item.data() + item.size(), index);
      if (item.empty() || error != std::errc{} || at != item.data() + item.size() || index < 0) {
        throw InputError(flag, "'" + device + "' does not list GPUs", expected);
      }
      if (std::find(gpu.each.begin(), gpu.each.end(), index) != gpu.each.end()) {
        throw InputError(flag, "'" + device + "' lists GPU " + item + " twice",
                         "each GPU once: a worker on each (cuda:NxW puts W workers on one)");
      }
      gpu.each.push_back(index);
    }
    if (gpu.each.size() > 64) throw InputError(flag, "'" + device + "' lists more than 64 GPUs", expected);
    gpu.index = gpu.each.front();
    gpu.workers = static_cast<int64_t>(gpu.each.size());
    return gpu;
  }
  const std::string rest = device.size() > 5 ? device.substr(5) : std::string();
  const char* end = rest.data() + rest.size();
  auto [at, error] = std::from_chars(rest.data(), end, gpu.index);
  if (device.size() < 6 || device.rfind("cuda:", 0) != 0 || error != std::errc{} || gpu.index < 0) {
    throw InputError(flag, "'" + device + "' does not name a GPU", expected);
  }
  if (at != end) {
    if (*at != 'x') throw InputError(flag, "'" + device + "' does not name a GPU", expected);
    const auto [workers_end, workers_error] = std::from_chars(at + 1, end, gpu.workers);
    if (workers_error != std::errc{} || workers_end != end || gpu.workers < 1 || gpu.workers > 64) {
      throw InputError(flag, "'" + device + "' does not name 1 to 64 workers", expected);
    }
  }
  return gpu;
}

bool one_rank_per_gpu(const std::vector<int>& gpu_of_rank, const std::vector<int>& host_of_rank) {
  TRAINSIM_CHECK(gpu_of_rank.size() == host_of_rank.size(), "one_rank_per_gpu: a GPU and a host for every rank");
  std::set<std::pair<int, int>> taken;  // (host, GPU)
  for (size_t r = 0; r < gpu_of_rank.size(); ++r) {
    if (!taken.emplace(host_of_rank[r], gpu_of_rank[r]).second) return false;
  }
  return true;
}

WorkerDevices parse_worker_devices(const std::string& text) {
  WorkerDevices d;
  if (text.rfind("cuda", 0) == 0) {
    d.gpu = parse_gpu_device(text, "--devices");
    d.workers = d.gpu->workers;
  } else {
    d.workers = parse_cpu_devices(text);
  }
  return d;
}

CudaPrecision parse_gpu_precision(const std::string& text, bool gpu) {
  if (text == "fp32") return CudaPrecision::fast;
  if (text != "tf32" && text != "bf16") {
    throw InputError("--precision", "'" + text + "' is not a precision", "fp32, tf32 or bf16");
  }
  if (!gpu) {
    throw InputError("--precision", text + " on CPU workers",
                     "fp32, or tf32 or bf16 on a GPU (cuda, cuda:N: its tensor cores)");
  }
  return text == "tf32" ? CudaPrecision::tf32 : CudaPrecision::bf16;
}

std::function<std::unique_ptr<Transport>(int endpoints)> gpu_each_transports(const std::vector<int>& gpus) {
  if (!nccl_library_error().empty()) return nullptr;
  make_nccl_transport(gpus);  // its checks
  return [gpus, kept = make_nccl_communicators()](int endpoints) {
    TRAINSIM_CHECK(endpoints >= 1 && static_cast<size_t>(endpoints) <= gpus.size(),
                   "a plan of more workers than GPUs listed");
    return make_nccl_transport(std::vector<int>(gpus.begin(), gpus.begin() + endpoints), 0, kept);
  };
}

}  // namespace trainsim
