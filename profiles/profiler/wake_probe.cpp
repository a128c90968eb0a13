// The wake-up probes (wake_probe.hpp): threads of the executor's scheduler
// and in-process transport, pinned as a run pins them, timed as they wake
// one another.
#include "profiles/profiler/wake_probe.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/transport/in_process.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {

// A barrier of `workers` threads of InProcessTransport as a pipeline meets
// it: the last thread arrives `late_s` after the others, which wait asleep.
// Each round's time runs from the last arrival to the last release; the
// median over rounds.
double measure_barrier_s(int64_t workers, const ClusterProbeOptions& o) {
  InProcessTransport transport(static_cast<int>(workers));
  std::vector<int> group(static_cast<size_t>(workers));
  std::iota(group.begin(), group.end(), 0);
  const int64_t rounds = o.warmups + o.barrier_repeats;
  std::vector<double> arrival_s(static_cast<size_t>(rounds));
  std::vector<std::vector<double>> release_s(static_cast<size_t>(workers), std::vector<double>(arrival_s.size()));
  run_workers(transport, static_cast<int>(workers), [&](int w) {
    const bool last = w + 1 == static_cast<int>(workers);
    for (int64_t r = 0; r < rounds; ++r) {
      if (last) {
        spin_for_s(o.barrier_late_s);
        arrival_s[static_cast<size_t>(r)] = now_s();
      }
      transport.barrier(w, group, 0);
      release_s[static_cast<size_t>(w)][static_cast<size_t>(r)] = now_s();
    }
  });
  std::vector<double> samples_s;
  for (int64_t r = o.warmups; r < rounds; ++r) {
    double released_s = arrival_s[static_cast<size_t>(r)];
    for (const auto& times : release_s) released_s = std::max(released_s, times[static_cast<size_t>(r)]);
    samples_s.push_back(released_s - arrival_s[static_cast<size_t>(r)]);
  }
  return median_s(samples_s);
}

// The executor's hand-off (exec/interpreter/scheduler.cpp, run_op): worker 0's compute
// thread ends an op, sets its done flag, wakes the communication thread
// waiting on it and yields; that thread runs its op, which wakes worker 1's
// thread waiting on it (a send's receiver: nothing but done flags here), and
// sleeps on its next wait. Each round's time runs from the compute thread's
// op end to its return from the yield. The threads sit on the cores
// worker_thread_core gives them, so where worker 0's two share a core the
// compute thread waits out the communication thread's turn, its wake-up of
// the other core included. The compute thread spins handoff_work_s between
// rounds, so the others are asleep each time, as after an op. In one process
// of a run across processes (as_workers) the two threads sit as that
// process's worker's do, and the peer's thread is another process's.
double measure_handoff_s(int64_t workers, const ClusterProbeOptions& o) {
  const int64_t rounds = o.warmups + o.handoff_repeats;
  const auto ready = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(rounds));
  const auto done = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(rounds));
  const int64_t cores = usable_cores();
  const bool shared = o.as_workers > 0;  // worker as_worker of a run across processes
  const int64_t threads = workers > 1 && !shared ? 3 : 2;  // compute, its communication, the peer's
  const int32_t self = shared ? o.as_worker : 0;
  const int64_t of = shared ? o.as_workers : workers;
  std::vector<double> samples_s;
  run_threads(threads, [&](int64_t thread, std::barrier<>& sync) {
    pin_current_thread(thread == 2 ? worker_thread_core(1, of, cores, false)
                                   : worker_thread_core(self, of, cores, thread == 0));
    sync.arrive_and_wait();
    for (int64_t r = 0; r < rounds; ++r) {
      const auto i = static_cast<size_t>(r);
      if (thread == 2) {
        done[i].wait(false);
      } else if (thread == 1) {
        ready[i].wait(false);
        done[i].store(true);
        done[i].notify_all();
      } else {
        spin_for_s(o.handoff_work_s);
        const double start_s = now_s();
        ready[i].store(true);
        ready[i].notify_all();
        std::this_thread::yield();
        if (r >= o.warmups) samples_s.push_back(now_s() - start_s);
      }
    }
  });
  return median_s(samples_s);
}

// A message's path through the executor from one worker to another
// (exec/interpreter: p2p ops and the scheduler's done flags): worker 0's
// send thread delivers it; worker 1's receive thread, asleep in recv, wakes
// and marks its op done; worker 1's compute thread, asleep on that flag,
// wakes to start the op that needs it. Each round runs from the send's start
// to that wake; the sender waits for it spinning, then computes
// `handoff_work_s`, so each message finds the receiving side asleep, as a
// pipeline stage waiting for its input is. The median over rounds: the
// link's latency, which the simulator adds between a send's end and its
// receive (sim/des/engine.cpp).
double measure_message_latency_s(int64_t workers, const ClusterProbeOptions& o) {
  const int64_t rounds = o.warmups + o.handoff_repeats;
  const int64_t pair = std::max<int64_t>(2, workers);
  const auto sent = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(rounds));
  const auto received = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(rounds));
  std::vector<double> sent_s(static_cast<size_t>(rounds)), woken_s(sent_s.size());
  std::atomic<int64_t> woken{-1};
  const int64_t cores = usable_cores();
  InProcessTransport transport(2);
  run_threads(3, [&](int64_t thread, std::barrier<>& sync) {
    // 0: worker 0's send thread; 1: worker 1's receive thread; 2: worker 1's compute thread.
    pin_current_thread(worker_thread_core(thread == 0 ? 0 : 1, pair, cores, thread == 2));
    sync.arrive_and_wait();
    for (int64_t r = 0; r < rounds; ++r) {
      const auto i = static_cast<size_t>(r);
      if (thread == 0) {
        spin_for_s(o.handoff_work_s);
        sent_s[i] = now_s();
        transport.send(0, 1, r, std::vector<float>(1, 1.0f));
        sent[i].store(true);
        sent[i].notify_all();
        while (woken.load(std::memory_order_acquire) < r) {
        }
      } else if (thread == 1) {
        sent[i].wait(false);
        (void)transport.recv(1, 0, r);
        received[i].store(true);
        received[i].notify_all();
      } else {
        received[i].wait(false);
        woken_s[i] = now_s();
        woken.store(r, std::memory_order_release);
      }
    }
  });
  std::vector<double> samples_s;
  for (int64_t r = o.warmups; r < rounds; ++r) {
    samples_s.push_back(woken_s[static_cast<size_t>(r)] - sent_s[static_cast<size_t>(r)]);
  }
  return median_s(samples_s);
}

}  // namespace trainsim
