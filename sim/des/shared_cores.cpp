// Cores that workers share (Cluster::shared_cores): the emulated machines of
// `cluster emulate` run every rank's threads on one computer's cores, worker
// w's on core w mod N, as the executor pins them. On such a core the
// workers' compute ops, their hand-offs and the messages they receive are
// all the core's work: processor sharing, each job at its rate over the
// core's job count, every job's end moved when that count changes. A
// message's latency is its receiver's core work (docs/simulator.md: over
// emulated links, a small message's one-way time is the cores' network
// stack and wake-ups, not a wire's).
#include <algorithm>
#include <cmath>

#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {

// A job joins worker's core: the jobs there bank their work at their old
// rates and run at their new ones from now.
void Engine::add_core_job(int32_t worker, OpId op, OpId by, double work_ns) {
  const int32_t core = core_of_worker_[worker];
  core_jobs_[core].push_back(CoreJob{op, by, work_ns, 1.0, now_ns_});
  reschedule_core(core);
}

// The job of `op` (a compute op ending, the op a hand-off or message
// releases, or a ring hop's piece) leaves its core; returns its `by`, or
// kCompute where `op` had none there.
OpId Engine::end_core_job(OpId op) {
  const int32_t core = core_of_worker_[states_[op].worker];
  std::vector<CoreJob>& jobs = core_jobs_[core];
  const auto it = std::find_if(jobs.begin(), jobs.end(), [op](const CoreJob& j) { return j.op == op; });
  if (it == jobs.end()) return CoreJob::kCompute;
  const OpId by = it->by;
  jobs.erase(it);
  reschedule_core(core);
  return by;
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
  if (core_jobs_.empty() || !(cluster_.link_kernel_s_per_byte > 0)) return;
  const double now = flows_.crossing_bytes_per_ns();
  const double delta = now - crossing_bytes_per_ns_;
  crossing_bytes_per_ns_ = now;
  add_kernel_cores(cluster_.link_kernel_s_per_byte * kNsPerS * delta);
}

// Every job on the core banks the work done since its last change at its
// rate, takes the core's new share of what the links' kernel work leaves (a
// compute op times the rate its worker's communication leaves it,
// CoreShare::rate) and has its end event moved: a compute op's kOpEnd, a release's kHandedOff,
// each with a bumped version so the old event is ignored.
void Engine::reschedule_core(int32_t core) {
  std::vector<CoreJob>& jobs = core_jobs_[core];
  if (jobs.empty()) return;
  const double share = kernel_share() / static_cast<double>(jobs.size());
  for (CoreJob& j : jobs) {
    j.remaining_ns = std::max(0.0, j.remaining_ns - j.rate * static_cast<double>(now_ns_ - j.since_ns));
    j.since_ns = now_ns_;
    const bool compute = j.by == CoreJob::kCompute;
    j.rate = (compute ? core_shares_[states_[j.op].worker].rate() : 1.0) * share;
    const SimTime left_ns = to_clock_ns(std::ceil(j.remaining_ns / j.rate), j.op);
    if (compute) {
      OpState& op = states_[j.op];
      ++op.version;
      push(later_ns(now_ns_, left_ns, j.op), j.op, kOpEnd | (op.version << 2));
    } else {
      const uint32_t version = ++release_version_[j.op];
      push(later_ns(now_ns_, left_ns, j.op), j.op, kHandedOff | (version << 2));
    }
  }
}

}  // namespace trainsim::des_detail
