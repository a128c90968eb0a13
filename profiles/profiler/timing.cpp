// Stopwatch medians, machine facts from /proc, and the barrier-synchronised
// thread runner the profiler's concurrent measurements use.
#include "profiles/profiler/timing.hpp"

#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "model/error.hpp"

namespace trainsim {

double median_s(std::vector<double> samples_s) {
  if (samples_s.empty()) return 0;
  std::sort(samples_s.begin(), samples_s.end());
  const size_t n = samples_s.size();
  return n % 2 == 1 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("model name")) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto begin = line.find_first_not_of(" \t", colon + 1);
    if (begin != std::string::npos) return line.substr(begin);
  }
  struct utsname uts {};
  return uname(&uts) == 0 ? std::string(uts.machine) : std::string("cpu");
}

double total_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double value = 0;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") return value * 1024.0;  // the kernel writes kB meaning KiB
  }
  struct sysinfo info {};
  if (sysinfo(&info) == 0) return static_cast<double>(info.totalram) * info.mem_unit;
  return 0;
}

int64_t max_worker_threads() {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::min<int64_t>(4 * cores, kMaxWorkerThreads);
}

void run_threads(int64_t threads, const std::function<void(int64_t, std::barrier<>&)>& body) {
  TRAINSIM_CHECK(threads >= 1, "run_threads needs at least one thread");
  std::barrier<> sync(threads);
  std::mutex failure_mutex;
  std::exception_ptr failure;
  enum Start : int { kWait, kGo, kGiveUp };
  std::atomic<int> start{kWait};  // the gate every thread waits at before its body
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  const auto open_gate = [&](Start state) {
    start.store(state);
    start.notify_all();
    for (std::thread& thread : pool) thread.join();
  };
  for (int64_t t = 0; t < threads; ++t) {
    try {
      pool.emplace_back([&, t] {
        start.wait(kWait);
        if (start.load() == kGiveUp) return;
        try {
          body(t, sync);
        } catch (...) {
          {
            const std::lock_guard lock(failure_mutex);
            if (!failure) failure = std::current_exception();
          }
          sync.arrive_and_drop();  // the others' later phases no longer wait for this thread
        }
      });
    } catch (const std::system_error& error) {  // the system has no thread left for us
      open_gate(kGiveUp);
      throw std::runtime_error("cannot start thread " + std::to_string(t + 1) + " of " + std::to_string(threads) +
                               ": " + error.what());
    }
  }
  open_gate(kGo);
  if (failure) std::rethrow_exception(failure);
}

double concurrent_median_s(int64_t threads, int64_t warmups, int64_t repeats,
                           const std::function<void(int64_t)>& body) {
  std::vector<double> samples_s;
  run_threads(threads, [&](int64_t t, std::barrier<>& sync) {
    for (int64_t r = 0; r < warmups + repeats; ++r) {
      sync.arrive_and_wait();
      const double start_s = now_s();
      body(t);
      const double elapsed_s = now_s() - start_s;
      if (t == 0 && r >= warmups) samples_s.push_back(elapsed_s);
    }
  });
  return median_s(samples_s);
}

double concurrent_makespan_median_s(int64_t threads, int64_t warmups, int64_t repeats,
                                    const std::function<void(int64_t)>& body) {
  std::vector<double> samples_s;
  std::vector<double> ends_s(static_cast<size_t>(threads), 0.0);
  double start_s = 0;
  run_threads(threads, [&](int64_t t, std::barrier<>& sync) {
    for (int64_t r = 0; r < warmups + repeats; ++r) {
      sync.arrive_and_wait();
      if (t == 0) start_s = now_s();  // before any thread starts its call
      sync.arrive_and_wait();
      body(t);
      ends_s[static_cast<size_t>(t)] = now_s();
      sync.arrive_and_wait();
      if (t == 0 && r >= warmups) samples_s.push_back(*std::max_element(ends_s.begin(), ends_s.end()) - start_s);
    }
  });
  return median_s(samples_s);
}

}  // namespace trainsim
