// CGDP host accumulation: a fixed per-element summation order split over
// host threads by contiguous ranges, then the broadcast back.
#include "exec/optim/host_accumulate.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exec/process_cores.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

// Blocks of elements small enough that the chunks' parts stay in cache
// between the sum and the scale.
constexpr size_t kBlock = 4096;

void accumulate_range(std::span<const std::span<const float>> worker_chunks, std::span<float> host_sum,
                      int64_t begin, int64_t end, float scale) {
  for (auto b = static_cast<size_t>(begin); b < static_cast<size_t>(end); b += kBlock) {
    const size_t e = std::min(static_cast<size_t>(end), b + kBlock);
    std::copy(worker_chunks[0].begin() + static_cast<std::ptrdiff_t>(b),
              worker_chunks[0].begin() + static_cast<std::ptrdiff_t>(e), host_sum.begin() + static_cast<std::ptrdiff_t>(b));
    for (size_t w = 1; w < worker_chunks.size(); ++w) {
      const std::span<const float> chunk = worker_chunks[w];
      for (size_t i = b; i < e; ++i) host_sum[i] += chunk[i];
    }
    if (scale != 1.0f) {
      for (size_t i = b; i < e; ++i) host_sum[i] *= scale;
    }
  }
}

// Threads kept for the sums, so a step's accumulation of a few megabytes
// costs no thread starts (each tens of microseconds, as much as summing a
// megabyte): `run(n, task)` calls task(0) on the caller and task(1..n-1) on
// the kept threads, made as first needed, each free to run on any core of
// the process whatever core its maker was pinned to, and returns when all
// are done, rethrowing the first exception a task threw. One run at a time;
// a second caller waits for the first.
class HostThreads {
 public:
  HostThreads() = default;
  HostThreads(const HostThreads&) = delete;
  HostThreads& operator=(const HostThreads&) = delete;
  ~HostThreads() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int64_t n, const std::function<void(int64_t)>& task) {
    std::lock_guard one_run(run_mu_);
    while (static_cast<int64_t>(threads_.size()) < n - 1) {
      const auto index = static_cast<int64_t>(threads_.size()) + 1;
      threads_.emplace_back([this, index] { serve(index); });
    }
    {
      std::lock_guard lock(mu_);
      task_ = &task;
      helpers_ = n - 1;
      pending_ = n - 1;
      ++round_;
    }
    wake_.notify_all();
    guarded(task, 0);
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 private:
  // task(index); an exception kept for run() to rethrow, the first one.
  void guarded(const std::function<void(int64_t)>& task, int64_t index) {
    try {
      task(index);
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!failure_) failure_ = std::current_exception();
    }
  }

  void serve(int64_t index) {
    run_on_process_cores();  // not its maker's one core
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || round_ != seen; });
      if (stopping_) return;
      seen = round_;
      if (index > helpers_) continue;  // not needed this round
      const std::function<void(int64_t)>* task = task_;
      lock.unlock();
      guarded(*task, index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex run_mu_;  // one run at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t helpers_ = 0, pending_ = 0;
  uint64_t round_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

HostThreads& host_threads() {
  static HostThreads threads;
  return threads;
}

}  // namespace

std::pair<int64_t, int64_t> host_thread_range(int64_t count, int64_t threads, int64_t index) {
  TRAINSIM_CHECK(count >= 0 && threads >= 1 && index >= 0 && index < threads, "bad host thread split");
  const int64_t base = count / threads;
  const int64_t extra = count % threads;
  const int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

void host_accumulate(std::span<const std::span<const float>> worker_chunks, std::span<float> host_sum,
                     int64_t threads, float scale) {
  TRAINSIM_CHECK(threads >= 1, "host accumulation needs at least one thread");
  TRAINSIM_CHECK(!worker_chunks.empty(), "host accumulation over no workers");
  for (const auto& chunk : worker_chunks) {
    TRAINSIM_CHECK(chunk.size() == host_sum.size(), "worker chunk of " + std::to_string(chunk.size()) +
                                                        " floats for a host buffer of " +
                                                        std::to_string(host_sum.size()));
  }
  const auto count = static_cast<int64_t>(host_sum.size());
  const int64_t used = std::min(threads, std::max<int64_t>(count, 1));  // more would own no element
  const auto sum_range = [&](int64_t index) {
    const auto [begin, end] = host_thread_range(count, used, index);
    if (begin < end) accumulate_range(worker_chunks, host_sum, begin, end, scale);
  };
  run_on_host_threads(used, sum_range);
}

int64_t host_sum_threads(int64_t floats) {
  return std::clamp<int64_t>(floats / kFloatsPerHostThread, 1, process_start_cores());
}

void run_on_host_threads(int64_t threads, const std::function<void(int64_t)>& task) {
  TRAINSIM_CHECK(threads >= 1, "a run on no host thread");
  if (threads == 1) return task(0);
  host_threads().run(threads, task);
}

void broadcast_from_host(std::span<const float> host_sum, std::span<const std::span<float>> worker_chunks) {
  for (const std::span<float>& chunk : worker_chunks) {
    TRAINSIM_CHECK(chunk.size() == host_sum.size(), "broadcast into a chunk of another size");
    std::copy(host_sum.begin(), host_sum.end(), chunk.begin());
  }
}

}  // namespace trainsim
