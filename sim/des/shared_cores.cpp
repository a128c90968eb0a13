// Cores that workers share (Cluster::shared_cores): the emulated machines of
// `cluster emulate` run every rank's threads on one computer's cores, worker
// w's on core w mod N, as the executor pins them. On such a core the
// workers' compute ops, their hand-offs and the messages they receive are
// all the core's work: processor sharing, each job at its rate over the
// core's job count, every job's end moved when that count changes. A
// message's latency is its receiver's core work (docs/simulator.md: over
// emulated links, a small message's one-way time is the cores' network
// stack and wake-ups, not a wire's).
//
// Who gets the core is the scheduler's (docs/simulator.md, "Who has a shared
// core"): a worker's compute thread runs its ops back to back until it
// blocks, so one worker's compute holds the core (its owner) while the
// others' compute ops queue; and threads that wait by polling (receiving a
// message, a ring's member waiting for its chunk) give the core up at every
// poll, so their work waits until no compute holds the core, or until a
// compute thread yields as it hands an op to another thread of its worker.
//
// Devices that virtual workers share (Cluster::shared_devices, `cuda:GxW`)
// use the same clocks with compute ops as their only jobs, all running at
// once: n of them each at shared_device_rate(n) (profiles/cluster.hpp), a
// GPU's kernels from several streams filling it together; none of the
// cores' scheduling applies.
#include <algorithm>
#include <cmath>

#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {

// A job joins worker's core: it ends once the core's virtual clock has
// moved on by its work over its rate.
void Engine::add_core_job(int32_t worker, OpId op, OpId by, double work_ns) {
  const int32_t core = core_of_worker_[worker];
  advance_core(core);
  const double rate = by == CoreJob::kCompute ? core_shares_[worker].rate() : 1.0;
  core_jobs_[core].push_back(CoreJob{op, by, core_clocks_[core].v + work_ns / rate, rate});
  reschedule_core(core);
}

// The job of `op` (a compute op ending, the op a hand-off or message
// releases, or a ring hop's piece) leaves its core as its event fires;
// returns its `by`, or kCompute where `op` had none there.
OpId Engine::end_core_job(OpId op) {
  const int32_t core = core_of_worker_[states_[op].worker];
  std::vector<CoreJob>& jobs = core_jobs_[core];
  const auto it = std::find_if(jobs.begin(), jobs.end(), [op](const CoreJob& j) { return j.op == op; });
  if (it == jobs.end()) return CoreJob::kCompute;
  advance_core(core);
  const OpId by = it->by;
  jobs.erase(it);
  if (core_clocks_[core].next == op) core_clocks_[core].next = -1;  // its event has fired
  reschedule_core(core);
  return by;
}

// The core's virtual clock moves on to now at the share it had.
void Engine::advance_core(int32_t core) {
  CoreClock& clock = core_clocks_[core];
  clock.v += clock.share * static_cast<double>(now_ns_ - clock.since_ns);
  clock.since_ns = now_ns_;
}

// What the links' kernel work leaves of a shared core: the running
// collectives' kernel_cores spread over all of them, never less than
// kMinKernelShare (past that the links themselves would slow).
double Engine::kernel_share() const {
  const double left = 1 - kernel_cores_ / static_cast<double>(core_jobs_.size());
  return std::max(kMinKernelShare, left);
}

// The kernel's work for a collective's links starts (+) or ends (−): every
// shared core's jobs bank their work and run at the new share.
void Engine::add_kernel_cores(double delta) {
  if (delta == 0) return;
  kernel_cores_ = std::max(0.0, kernel_cores_ + delta);
  for (size_t core = 0; core < core_jobs_.size(); ++core) reschedule_core(static_cast<int32_t>(core));
}

// Sends between machines moving bytes take the kernel's work for them from
// the shared cores too (Cluster::link_kernel_s_per_byte per byte crossing
// a link): after a send's flow joins or leaves, the cores it keeps busy
// follow the bytes per second crossing between machines.
void Engine::count_crossing_sends() {
  if (!core_scheduling_ || !(cluster_.link_kernel_s_per_byte > 0)) return;
  const double now = flows_.crossing_bytes_per_ns();
  const double delta = now - crossing_bytes_per_ns_;
  crossing_bytes_per_ns_ = now;
  add_kernel_cores(cluster_.link_kernel_s_per_byte * kNsPerS * delta);
}

// After a change on the core (a job joins or leaves, the links' kernel work
// or a worker's communication changes a rate): its clock takes the new
// share of what the links' kernel work leaves, a compute op whose rate
// changed keeps the work it has left, and the job to end first has its end
// event, the one it replaces (another job's, or its own at another time)
// dropped by a bumped version: a compute op's kOpEnd, a release's or a hop
// piece's kHandedOff.
void Engine::reschedule_core(int32_t core) {
  CoreClock& clock = core_clocks_[core];
  advance_core(core);
  std::vector<CoreJob>& jobs = core_jobs_[core];
  const auto n = static_cast<int64_t>(jobs.size());
  clock.share =
      n == 0 ? 0.0
             : kernel_share() * (core_scheduling_ ? 1.0 / static_cast<double>(n) : shared_device_rate(cluster_, n));
  const CoreJob* first = nullptr;
  for (CoreJob& j : jobs) {
    if (j.by == CoreJob::kCompute) {
      const double rate = core_shares_[states_[j.op].worker].rate();
      if (rate != j.rate) {
        j.finish_v = clock.v + (j.finish_v - clock.v) * j.rate / rate;
        j.rate = rate;
      }
    }
    if (first == nullptr || j.finish_v < first->finish_v) first = &j;
  }
  const OpId next = first != nullptr ? first->op : -1;
  SimTime at_ns = 0;
  if (first != nullptr) {
    const double left_ns = std::max(0.0, first->finish_v - clock.v) / clock.share;
    at_ns = later_ns(now_ns_, to_clock_ns(std::ceil(left_ns), next), next);
    if (next == clock.next && at_ns == clock.next_ns) return;  // its event stands
  }
  if (clock.next >= 0) bump_core_event(clock.next, clock.next_by);
  clock.next = next;
  clock.next_ns = at_ns;
  if (next < 0) return;
  clock.next_by = first->by;
  const uint32_t version = bump_core_event(next, first->by);
  push(at_ns, next, (first->by == CoreJob::kCompute ? kOpEnd : kHandedOff) | (version << 2));
}

// A job's pending end event is dropped (its version moves on); returns the new version.
uint32_t Engine::bump_core_event(OpId op, OpId by) {
  return by == CoreJob::kCompute ? ++states_[op].version : ++release_version_[op];
}

// Compute holds the core: a compute op on it, or one waiting for its owner.
bool Engine::core_computes(int32_t core) const {
  if (!queued_compute_[core].empty()) return true;
  return std::any_of(core_jobs_[core].begin(), core_jobs_[core].end(),
                     [](const CoreJob& j) { return j.by == CoreJob::kCompute; });
}

// Whether `worker` has a compute op on `core`.
bool Engine::computes_on(int32_t core, int32_t worker) const {
  return std::any_of(core_jobs_[core].begin(), core_jobs_[core].end(),
                     [&](const CoreJob& j) { return j.by == CoreJob::kCompute && states_[j.op].worker == worker; });
}

// A compute op left `core`. A compute thread that hands an op to another
// thread of its worker yields the core (the executor's scheduler): the
// pollers get it now. Where others wait for the core, it is looked at again
// once the op's successors have started (check_core).
void Engine::compute_left_core(int32_t core, OpId op) {
  if (states_[op].hands_off) let_pollers_in(core);
  if (!queued_compute_[core].empty() || !pollers_[core].empty()) push(now_ns_, op, kHandedOff | (kCoreCheck << 2));
}

// After a compute op of `op`'s worker ended and what it released started:
// the owner keeps the core if its next compute op runs, else the first
// queued worker takes it; with no compute left, the pollers get the core.
// (An owner that blocked with nobody queued keeps the name until the next
// worker's compute op takes the core: start_compute.)
void Engine::check_core(OpId op) {
  const int32_t worker = states_[op].worker;
  const int32_t core = core_of_worker_[worker];
  std::vector<OpId>& queue = queued_compute_[core];
  if (core_owner_[core] == worker && !computes_on(core, worker) && !queue.empty()) {
    const OpId next = queue.front();
    queue.erase(queue.begin());
    core_owner_[core] = -1;
    start_compute(next);
  }
  if (!core_computes(core)) let_pollers_in(core);
}

// The pollers waiting on `core` start their work there.
void Engine::let_pollers_in(int32_t core) {
  std::vector<Poller> pollers;
  pollers.swap(pollers_[core]);
  for (const Poller& p : pollers) {
    if (p.by == CoreJob::kHopPiece) {
      start_hop_piece(hop_slot_[p.op]);
    } else {
      add_core_job(states_[p.op].worker, p.op, p.by, p.work_ns);
    }
  }
}

}  // namespace trainsim::des_detail
