// The scheduler: threads per stream, dependency waits, hand-offs between a
// worker's streams, timings; and the pinning of threads to cores.
#include "exec/interpreter/scheduler.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "exec/library_calls.hpp"
#include "exec/transport/in_process.hpp"

namespace trainsim::interp {

Scheduler::Scheduler(const Plan& plan, Transport& transport, bool pin_workers, std::vector<uint8_t> local)
    : plan_(plan), transport_(transport), pin_workers_(pin_workers), local_(std::move(local)), done_(plan.ops.size()),
      timings_(plan.ops.size()) {
  releases_own_stream_.assign(plan.ops.size(), 0);
  for (const Op& op : plan.ops) {
    for (OpId dep : op.deps) {
      const Op& d = plan.ops[static_cast<size_t>(dep)];
      if (d.stream == StreamKind::kCompute && d.worker == op.worker && op.stream != StreamKind::kCompute) {
        releases_own_stream_[static_cast<size_t>(dep)] = 1;
      }
    }
  }
}

void Scheduler::run(OpHandler& handler) {
  std::vector<std::pair<int32_t, int32_t>> streams;  // (worker, stream kind) with ops
  for (size_t w = 0; w < plan_.streams.size(); ++w) {
    if (!is_local(static_cast<int32_t>(w))) continue;
    for (int k = 0; k < kStreamKinds; ++k) {
      if (!plan_.streams[w][k].empty()) streams.emplace_back(static_cast<int32_t>(w), k);
    }
  }
  start_ = std::chrono::steady_clock::now();
  const auto threads = static_cast<int>(streams.size());
  const int64_t cores = usable_cores();
  run_workers(transport_, threads, [&](int i) {
    try {
      const auto [w, k] = streams[static_cast<size_t>(i)];
      if (pin_workers_) {
        pin_current_thread(worker_thread_core(w, static_cast<int64_t>(plan_.streams.size()), cores,
                                              k == static_cast<int>(StreamKind::kCompute)));
      }
      for (OpId id : plan_.streams[w][k]) run_op(handler, id);
    } catch (...) {
      release_waiters();
      throw;
    }
  });
}

double Scheduler::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Scheduler::wait_for_deps(const Op& op) {
  for (OpId dep : op.deps) {
    if (is_local(plan_.ops[static_cast<size_t>(dep)].worker)) done_[static_cast<size_t>(dep)].wait(false);
  }
  if (failed_.load()) throw TransportAborted("another worker failed");
}

// A failing worker wakes every thread waiting on an op, so the run stops
// with that worker's error instead of hanging.
void Scheduler::release_waiters() {
  failed_.store(true);
  transport_.abort("a worker failed");
  for (auto& flag : done_) {
    flag.store(true);
    flag.notify_all();
  }
}

void Scheduler::run_op(OpHandler& handler, OpId id) {
  const Op& op = plan_.ops[static_cast<size_t>(id)];
  wait_for_deps(op);
  const int64_t calls = library_calls;
  timings_[static_cast<size_t>(id)].start_s = now_s();
  handler.execute(id, op);
  timings_[static_cast<size_t>(id)].end_s = now_s();
  timings_[static_cast<size_t>(id)].library_calls = library_calls - calls;
  done_[static_cast<size_t>(id)].store(true);
  done_[static_cast<size_t>(id)].notify_all();
  // A compute op that released another thread of its worker (a send, a
  // collective, a copy) lets it take the core now, as a DMA engine would
  // start at once: the scheduler otherwise leaves it waiting for the rest
  // of the compute thread's time slice (hundreds of µs here).
  if (releases_own_stream_[static_cast<size_t>(id)]) std::this_thread::yield();
}

void align_timings(const Plan& plan, const std::vector<double>& start_clock_s, std::vector<ExecOpTiming>& timings) {
  std::vector<double> shift(start_clock_s.size(), 0.0);
  double earliest = 0.0;
  for (size_t w = 0; w < shift.size(); ++w) {
    if (!std::isnan(start_clock_s[w])) shift[w] = start_clock_s[w] - start_clock_s[0];
    earliest = std::min(earliest, shift[w]);
  }
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const double by = shift.at(static_cast<size_t>(plan.ops[id].worker)) - earliest;
    timings[id].start_s += by;
    timings[id].end_s += by;
    timings[id].device_start_s += by;  // NaN stays NaN
    timings[id].device_end_s += by;
  }
}

double clock_offset_s(const std::vector<ClockSample>& samples) {
  const auto best = std::min_element(samples.begin(), samples.end(), [](const ClockSample& a, const ClockSample& b) {
    return a.received_s - a.sent_s < b.received_s - b.sent_s;
  });
  return best == samples.end() ? 0.0 : best->remote_s - (best->sent_s + best->received_s) / 2;
}

}  // namespace trainsim::interp

namespace trainsim {

bool pin_current_thread(int core) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0) return false;
  int target = core % CPU_COUNT(&allowed);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (target-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  return false;
}

int64_t usable_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return std::max(1, CPU_COUNT(&allowed));
}

bool communication_shares_compute_core(int64_t workers, int64_t cores) { return cores < 2 * workers; }

int worker_thread_core(int32_t worker, int64_t workers, int64_t cores, bool compute) {
  if (compute || communication_shares_compute_core(workers, cores)) return worker;
  return static_cast<int>(workers) + worker;
}

int64_t cores_per_worker(int64_t workers, int64_t cores) {
  return communication_shares_compute_core(workers, cores) ? 1 : 2;
}

}  // namespace trainsim
