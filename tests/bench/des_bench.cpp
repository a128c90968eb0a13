// The discrete-event simulator's speed: ops simulated per second on a
// synthetic data-parallel plan with transfers, copies and AllReduces over many
// workers (goal: >= 5 million/s), and a 64-stage 1F1B pipeline over 1000
// mini-batches (goal: >= 10 million/s). Each plan is checked before it is
// timed. Plans are built here so the numbers do not move with the generators.
// Memory, counted by replacing the global operator new: sim_bytes_per_op is
// the heap the simulator holds at its peak (result included) per op of the
// plan (goal: <= 100), plan_bytes_per_op what the plan itself holds. The
// data-parallel plan again with its workers sharing one computer's cores,
// 64 on 16 and on 2 (no goal: the cost grows with the workers per core).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {

std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void* counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  const int64_t live = g_live_bytes += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void uncounted(void* p) {
  if (p == nullptr) return;
  g_live_bytes -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}

void* aligned(size_t n, std::align_val_t alignment) {
  const auto a = static_cast<size_t>(alignment);
  return counted(std::aligned_alloc(a, (std::max<size_t>(n, 1) + a - 1) / a * a));
}

// The heap's peak while `f` ran, beyond what it held before.
template <typename F>
int64_t peak_bytes_during(F&& f) {
  const int64_t before = g_live_bytes;
  g_peak_bytes = before;
  f();
  return g_peak_bytes - before;
}

}  // namespace

void* operator new(size_t n) { return counted(std::malloc(std::max<size_t>(n, 1))); }
void* operator new[](size_t n) { return counted(std::malloc(std::max<size_t>(n, 1))); }
void* operator new(size_t n, std::align_val_t a) { return aligned(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return aligned(n, a); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, size_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { uncounted(p); }

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim {
namespace {

using testing_fixtures::simple_cluster;

Op make_op(OpKind kind, StreamKind stream, int32_t worker, int32_t iteration) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.worker = worker;
  op.iteration = iteration;
  return op;
}

// Every worker, each iteration: forward (1 ms), send 1e5 B to the next worker
// and receive from the previous one, backward (2 ms) after the receive, copy
// 1e5 B to the host, a ring AllReduce of 1e6 B over all workers, and the
// update (0.1 ms) after both: 7 ops on 4 streams per worker and iteration.
Plan data_parallel_plan(int32_t workers, int32_t iterations) {
  PlanBuilder b("bench-dp", workers, iterations, 32.0 * workers);
  std::vector<int32_t> everyone(workers);
  for (int32_t w = 0; w < workers; ++w) everyone[w] = w;
  const int32_t all = b.group(everyone);
  for (int32_t i = 0; i < iterations; ++i) {
    std::vector<OpId> sends(workers);
    std::vector<OpId> forwards(workers);
    for (int32_t w = 0; w < workers; ++w) {
      Op f = make_op(OpKind::kForward, StreamKind::kCompute, w, i);
      f.work_s = 1e-3;
      forwards[w] = b.add(f);
      Op s = make_op(OpKind::kSend, StreamKind::kSend, w, i);
      s.peer = (w + 1) % workers;
      s.bytes = 1e5;
      s.deps = {forwards[w]};
      sends[w] = b.add(s);
    }
    for (int32_t w = 0; w < workers; ++w) {
      const int32_t from = (w + workers - 1) % workers;
      Op r = make_op(OpKind::kRecv, StreamKind::kRecv, w, i);
      r.peer = from;
      r.deps = {sends[from]};
      const OpId recv = b.add(r);
      Op back = make_op(OpKind::kBackward, StreamKind::kCompute, w, i);
      back.work_s = 2e-3;
      back.deps = {recv};
      const OpId backward = b.add(back);
      Op copy = make_op(OpKind::kCopyToHost, StreamKind::kDeviceToHost, w, i);
      copy.bytes = 1e5;
      copy.deps = {backward};
      const OpId copied = b.add(copy);
      Op ar = make_op(OpKind::kAllReduce, StreamKind::kSend, w, i);
      ar.group = all;
      ar.bytes = 1e6;
      ar.deps = {backward};
      const OpId reduced = b.add(ar);
      Op update = make_op(OpKind::kUpdate, StreamKind::kCompute, w, i);
      update.work_s = 1e-4;
      update.deps = {reduced, copied};
      b.add(update);
    }
  }
  return std::move(b).build();
}

// PipeDream's 1F1B on `stages` equal stages (forward 1 ms, backward 2 ms,
// update 0.1 ms after each backward), `minibatches` mini-batches: stage s
// (from 0) runs S - s forwards, then alternates one backward (with its update)
// and one forward. Activations go down and gradients up as 1 kB transfers.
Plan one_f_one_b_plan(int32_t stages, int32_t minibatches) {
  PlanBuilder b("bench-1f1b", stages, minibatches, 32);
  std::vector<std::vector<OpId>> forward(stages, std::vector<OpId>(minibatches));
  std::vector<std::vector<OpId>> backward = forward, send_down = forward, send_up = forward;
  std::vector<std::vector<std::pair<bool, int32_t>>> order(stages);  // (is backward, mini-batch) per stage
  for (int32_t s = 0; s < stages; ++s) {
    const int32_t warm_up = std::min(stages - s, minibatches);
    for (int32_t k = 0; k < warm_up; ++k) order[s].push_back({false, k});
    for (int32_t k = 0; k < minibatches; ++k) {
      order[s].push_back({true, k});
      if (k + warm_up < minibatches) order[s].push_back({false, k + warm_up});
    }
    for (const auto& [is_backward, k] : order[s]) {
      Op op = make_op(is_backward ? OpKind::kBackward : OpKind::kForward, StreamKind::kCompute, s, k);
      op.stage = s;
      op.work_s = is_backward ? 2e-3 : 1e-3;
      (is_backward ? op.free_bytes : op.alloc_bytes) = 1e6;
      const OpId id = b.add(op);
      (is_backward ? backward : forward)[s][k] = id;
      if (is_backward) {
        Op update = make_op(OpKind::kUpdate, StreamKind::kCompute, s, k);
        update.work_s = 1e-4;
        b.add(update);
      }
      const int32_t peer = is_backward ? s - 1 : s + 1;
      if (peer < 0 || peer >= stages) continue;
      Op send = make_op(OpKind::kSend, StreamKind::kSend, s, k);
      send.peer = peer;
      send.bytes = 1e3;
      send.deps = {id};
      (is_backward ? send_up : send_down)[s][k] = b.add(send);
    }
  }
  // Receives in the order the compute stream consumes them.
  for (int32_t s = 0; s < stages; ++s) {
    for (const auto& [is_backward, k] : order[s]) {
      const int32_t peer = is_backward ? s + 1 : s - 1;
      if (peer < 0 || peer >= stages) continue;
      Op recv = make_op(OpKind::kRecv, StreamKind::kRecv, s, k);
      recv.peer = peer;
      recv.deps = {(is_backward ? send_up : send_down)[peer][k]};
      const OpId id = b.add(recv);
      b.op((is_backward ? backward : forward)[s][k]).deps.push_back(id);
    }
  }
  return std::move(b).build();
}

bool all_ops_timed(const SimResult& r) {
  for (const OpTiming& t : r.timings) {
    if (t.end_ns < t.start_ns) return false;
  }
  return r.events >= static_cast<int64_t>(r.timings.size());
}

// Bytes per op: what building the plan left held, and the simulator's peak.
void count_bytes(benchmark::State& state, const Plan& plan, int64_t plan_bytes, const Cluster& cluster) {
  const auto ops = static_cast<double>(plan.ops.size());
  const int64_t sim_bytes = peak_bytes_during([&] { benchmark::DoNotOptimize(simulate_plan(plan, cluster, {})); });
  state.counters["plan_bytes_per_op"] = static_cast<double>(plan_bytes) / ops;
  state.counters["sim_bytes_per_op"] = static_cast<double>(sim_bytes) / ops;
}

// Times simulate_plan over the benchmark's iterations, the plan's ops counted as items.
void time_simulation(benchmark::State& state, const Plan& plan, const Cluster& cluster) {
  for (auto _ : state) {
    SimResult r = simulate_plan(plan, cluster, {});
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(plan.ops.size()));
  state.counters["ops"] = static_cast<double>(plan.ops.size());
}

void BM_SimulateDataParallel(benchmark::State& state) {
  const auto workers = static_cast<int32_t>(state.range(0));
  const int64_t before = g_live_bytes;
  const Plan plan = data_parallel_plan(workers, 500);
  const int64_t plan_bytes = g_live_bytes - before;
  const Cluster cluster = simple_cluster(workers / 8, 8);
  const SimResult check = simulate_plan(plan, cluster, {});
  // Every iteration holds forward + backward + update, 3.1 ms, plus a transfer and an AllReduce.
  if (!all_ops_timed(check) || !(check.iteration_s > 3.1e-3)) state.SkipWithError("implausible simulation");
  time_simulation(state, plan, cluster);
  state.counters["events"] = static_cast<double>(check.events);
  count_bytes(state, plan, plan_bytes, cluster);
}

void BM_Simulate1F1B(benchmark::State& state) {
  const auto stages = static_cast<int32_t>(state.range(0));
  const auto minibatches = static_cast<int32_t>(state.range(1));
  const int64_t before = g_live_bytes;
  const Plan plan = one_f_one_b_plan(stages, minibatches);
  const int64_t plan_bytes = g_live_bytes - before;
  const Cluster cluster = simple_cluster(stages / 8, 8);
  const SimResult check = simulate_plan(plan, cluster, {});
  // Equal stages, negligible transfers: the steady state is one stage's
  // forward + backward + update per mini-batch, 3.1 ms.
  if (!all_ops_timed(check) || std::abs(check.iteration_s / 3.1e-3 - 1) > 0.01) {
    state.SkipWithError(("1F1B iteration " + std::to_string(check.iteration_s) + " s, expected 3.1 ms").c_str());
  }
  time_simulation(state, plan, cluster);
  state.counters["iteration_ms"] = check.iteration_s * 1e3;
  count_bytes(state, plan, plan_bytes, cluster);
}

// The same plan's workers as emulated hosts on one computer of `cores`
// cores (Cluster::shared_cores): every compute op, hand-off and ring hop's
// piece a job on a shared core, the ring AllReduce run hop by hop.
void BM_SimulateSharedCores(benchmark::State& state) {
  const auto workers = static_cast<int32_t>(state.range(0));
  const Plan plan = data_parallel_plan(workers, 100);
  Cluster cluster = simple_cluster(workers, 1);
  cluster.shared_cores = state.range(1);
  const SimResult check = simulate_plan(plan, cluster, {});
  // A core's workers share it: each iteration's compute, 3.1 ms, takes workers / cores times that.
  const double shared_compute_s = 3.1e-3 * static_cast<double>(workers) / static_cast<double>(state.range(1));
  if (!all_ops_timed(check) || !(check.iteration_s > shared_compute_s)) state.SkipWithError("implausible simulation");
  time_simulation(state, plan, cluster);
  state.counters["events"] = static_cast<double>(check.events);
}

BENCHMARK(BM_SimulateDataParallel)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateSharedCores)->Args({64, 16})->Args({64, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate1F1B)->Args({64, 1000})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainsim

BENCHMARK_MAIN();
