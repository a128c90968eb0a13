// The discrete-event engine: the event loop, collectives, and transfers as
// flows over shared ports (its state in engine_state.hpp, its setup in
// engine_setup.cpp). Time is integer nanoseconds; events are small PODs in a
// 4-ary heap (event_queue.hpp) ordered by (time, sequence), so ties run in
// push order and a run repeats exactly. Per-op buffers are sized before the
// loop; in it only the event heap, the flow slots and the ports' lists grow,
// to what is in flight at once.
#include "sim/des/engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/collective.hpp"
#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"
#include "sim/des/flows.hpp"
#include "sim/des/summary.hpp"

namespace trainsim {
namespace des_detail {

// A transfer op starting: its flow, on the ports of its path (flows.hpp),
// held while it runs.
int32_t Engine::open_flow(OpId id) {
  const OpState& t = states_[id];
  const int32_t device = device_of_worker_[t.worker];
  if (t.kind == OpKind::kSend) return flows_.add_send(id, device, t.target, t.amount);
  if (t.kind == OpKind::kHostAccumulate) return flows_.add_host_accumulate(id, machine_of_worker_[t.worker], t.amount);
  return flows_.add_copy(id, device, t.target == 1, t.amount);
}

double Engine::draw_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits

// A compute op's duration: work_s, times the slowdown with probability p,
// times a mean-1 lognormal factor of relative sd `jitter`. Draws happen in
// event order, so one seed gives one run.
SimTime Engine::compute_duration_ns(OpId id) {
  double factor = 1;
  if (options_.straggler_probability > 0 && draw_uniform() < options_.straggler_probability) {
    factor *= options_.straggler_slowdown;
  }
  if (options_.jitter > 0) {
    // Box-Muller: one standard normal from two uniforms (1 - u keeps the log finite).
    const double u1 = 1.0 - draw_uniform();
    const double u2 = draw_uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    factor *= std::exp(jitter_mu_ + jitter_sigma_ * z);
  }
  return duration_ns(states_[id].amount * factor, id);
}

// Every dep and the stream predecessor of `id` have ended: start it (or, for
// a collective, count it ready and start all members once the last is).
void Engine::on_ready(OpId id) {
  OpState& op = states_[id];
  if (is_compute(op.kind)) {
    start_compute(id);
  } else if (op.kind == OpKind::kRecv) {
    start(id);  // the bytes moved with the Send it depends on
    push(now_ns_, id, kOpEnd);
  } else if (op.kind == OpKind::kServerStep) {
    start(id);  // on its machine's host threads, beside the devices' work: its own time
    push(later_ns(now_ns_, duration_ns(op.amount, id), id), id, kOpEnd);
  } else if (is_collective(op.kind)) {
    record_.collective_ready_ns[id] = now_ns_;
    Collective& c = collectives_[op.index];
    if (++c.ready < c.members) return;
    for (int32_t m = 0; m < c.members; ++m) start(collective_ops_[c.first_slot + m]);
    start_collective(c);
  } else {
    op.index = open_flow(id);
    start(id);
    push(later_ns(now_ns_, flows_.latency_ns(op.index), id), id, kFlowJoin);
  }
}

// A compute op runs at full rate, or at the shared rate while its worker
// communicates on the same cores: processor sharing, so its end moves
// whenever that changes (reschedule_compute). On a shared core it waits
// while another worker's compute holds the core; on a shared device it
// shares the device with the compute ops running there (shared_cores.cpp).
void Engine::start_compute(OpId id) {
  if (core_scheduling_) {
    const int32_t worker = states_[id].worker;
    const int32_t core = core_of_worker_[worker];
    if (core_owner_[core] >= 0 && core_owner_[core] != worker && computes_on(core, core_owner_[core])) {
      queued_compute_[core].push_back(id);
      return;
    }
    core_owner_[core] = worker;
  }
  start(id);
  if (!host_ns_.empty() && !start_host_part(id)) return;  // its work waits for its worker's before it
  start_work(id);
}

// A compute op's work starts on its device (or core).
void Engine::start_work(OpId id) {
  if (!host_ns_.empty() && states_[id].memory >= 0) allocate(id);  // not at its host part's start
  const SimTime duration = compute_duration_ns(id);
  if (!core_jobs_.empty()) {  // on a core other workers share (shared_cores.cpp)
    core_shares_[states_[id].worker].running = id;
    add_core_job(states_[id].worker, id, -1, static_cast<double>(duration));
    if (sharing_) set_computing(states_[id].worker, +1);
    return;
  }
  if (!sharing_) {
    push(later_ns(now_ns_, duration, id), id, kOpEnd);
    return;
  }
  CoreShare& share = core_shares_[states_[id].worker];
  share.running = id;
  share.remaining_ns = static_cast<double>(duration);
  share.since_ns = now_ns_;
  reschedule_compute(share);
  set_computing(states_[id].worker, +1);
}

void Engine::reschedule_compute(CoreShare& share) {
  OpState& op = states_[share.running];
  const double rate = share.rate();
  ++op.version;
  const SimTime left_ns = to_clock_ns(std::ceil(share.remaining_ns / rate), share.running);
  push(later_ns(share.since_ns, left_ns, share.running), share.running, kOpEnd | (op.version << 2));
}

// A communication op starts or ends on its worker's cores; when that
// changes the rate the worker's running compute op gets (a collective's
// compute_rate: the device's within a machine, more across machines, where
// the links' time leaves the cores free), the op banks the work done at the
// old rate and has its end moved.
void Engine::set_communicating(OpId id, bool starts) {
  const OpState& op = states_[id];
  CoreShare& share = core_shares_[op.worker];
  const double old_rate = share.rate();
  const double rate = is_collective(op.kind) ? collectives_[op.index].compute_rate : shared_rate_;
  if (starts) {
    share.communicating.push_back(rate);
  } else {
    share.communicating.erase(std::find(share.communicating.begin(), share.communicating.end(), rate));
  }
  if (share.rate() == old_rate || share.running < 0) return;
  if (!core_jobs_.empty()) {
    reschedule_core(core_of_worker_[op.worker]);
    return;
  }
  share.remaining_ns = std::max(0.0, share.remaining_ns - old_rate * static_cast<double>(now_ns_ - share.since_ns));
  share.since_ns = now_ns_;
  reschedule_compute(share);
}

// The other side of that sharing: a collective whose members communicate on
// their workers' cores runs at its shared rate while any member's worker
// computes (the slowest member paces it), at full rate otherwise.
void Engine::start_collective(Collective& c) {
  c.running = true;
  add_kernel_cores(c.kernel_cores);
  if (c.hops) {  // its members' pieces on their cores (ring_hops.cpp)
    start_hops(c);
    return;
  }
  c.remaining_ns = static_cast<double>(c.duration_ns);
  if (c.crosses_machines) c.remaining_ns = std::max(0.0, c.remaining_ns - take_links(c) * c.link_ns_per_byte);
  c.since_ns = now_ns_;
  c.computing = 0;
  if (sharing_ && uses_worker_cores(c.kind)) {  // not a barrier, whose members wait asleep
    for (int32_t m = 0; m < c.members; ++m) {
      const int32_t worker = states_[collective_ops_[c.first_slot + m]].worker;
      if (core_shares_[worker].running >= 0) ++c.computing;
      running_collectives_[worker].push_back(static_cast<int32_t>(&c - collectives_.data()));
    }
  }
  reschedule_collective(c);
  if (c.crosses_machines) join_links(c);
}

void Engine::reschedule_collective(Collective& c) {
  const double rate = collective_rate(c);
  const OpId first = collective_ops_[c.first_slot];
  const SimTime left_ns = to_clock_ns(std::ceil(c.remaining_ns / rate), first);
  for (int32_t m = 0; m < c.members; ++m) {
    const OpId member = collective_ops_[c.first_slot + m];
    OpState& op = states_[member];
    ++op.version;
    push(later_ns(c.since_ns, left_ns, member), member, kOpEnd | (op.version << 2));
  }
}

// A compute op of `worker` starts (+1) or ends (−1): each collective it is
// in banks its progress at the old rate and has its end moved when its rate
// changes.
void Engine::set_computing(int32_t worker, int32_t delta) {
  for (const int32_t index : running_collectives_[worker]) {
    Collective& c = collectives_[index];
    const bool was = c.computing > 0;
    c.computing += delta;
    if (was == (c.computing > 0)) continue;
    const double old_rate = (was ? c.shared_rate : 1.0) * c.nic_rate;
    c.remaining_ns = std::max(0.0, c.remaining_ns - old_rate * static_cast<double>(now_ns_ - c.since_ns));
    c.since_ns = now_ns_;
    reschedule_collective(c);
  }
}

// The machines a collective's members run on, sorted, each once.
const std::vector<int32_t>& Engine::machines_of(const Collective& c) {
  machines_scratch_.clear();
  for (int32_t m = 0; m < c.members; ++m) {
    machines_scratch_.push_back(machine_of_worker_[states_[collective_ops_[c.first_slot + m]].worker]);
  }
  std::sort(machines_scratch_.begin(), machines_scratch_.end());
  machines_scratch_.erase(std::unique(machines_scratch_.begin(), machines_scratch_.end()), machines_scratch_.end());
  return machines_scratch_;
}

void Engine::end_collective(Collective& c) {
  if (!c.running) return;                          // ended by an earlier member
  if (c.hops && --c.hop_members_left > 0) return;  // run hop by hop: ended by its last member
  c.running = false;
  add_kernel_cores(-c.kernel_cores);
  if (c.crosses_machines) {
    flows_.release_nics(machines_of(c), c.link_share, now_ns_, completions_);
    push_completions();
    if (!c.hops) leave_links(c);
  }
  if (!sharing_ || !uses_worker_cores(c.kind)) return;
  const auto index = static_cast<int32_t>(&c - collectives_.data());
  for (int32_t m = 0; m < c.members; ++m) {
    std::vector<int32_t>& list = running_collectives_[states_[collective_ops_[c.first_slot + m]].worker];
    list.erase(std::remove(list.begin(), list.end(), index), list.end());
  }
}

void Engine::start(OpId id) {
  const OpState& op = states_[id];
  result_.timings[id].start_ns = now_ns_;
  if (sharing_ && uses_worker_cores(op.kind)) set_communicating(id, true);
  // Its successors are touched when it ends, after other events: fetch their
  // states now so that end does not wait on memory.
  for (int32_t s = successor_offsets_[id]; s < successor_offsets_[id + 1]; ++s) {
    __builtin_prefetch(&states_[successors_[s]], 1);
  }
  // A compute op of a GPU worker's host allocates when its work starts (host_time.cpp).
  if (op.memory >= 0 && (host_ns_.empty() || !is_compute(op.kind))) allocate(id);
}

void Engine::allocate(OpId id) {
  const OpState& op = states_[id];
  double& live = live_bytes_[op.worker];
  live += memory_bytes_[op.memory][0];
  peak_live_bytes_[op.worker] = std::max(peak_live_bytes_[op.worker], live);
}

void Engine::finish(OpId id) {
  const OpState& op = states_[id];
  result_.timings[id].end_ns = now_ns_;
  if (is_collective(op.kind)) end_collective(collectives_[op.index]);
  if (sharing_ && uses_worker_cores(op.kind)) set_communicating(id, false);
  leave_device(id);
  if (op.memory >= 0) live_bytes_[op.worker] -= memory_bytes_[op.memory][1];
  ++finished_;
  int32_t s = successor_offsets_[id];
  if (op.hands_off) release_after(op.worker, successors_[s++], id, handoff_ns_);  // its stream successor
  if (op.kind == OpKind::kSend) {
    // Its message reaches the receiving worker the link's latency later.
    const SimTime latency_ns = flows_.send_latency_ns(device_of_worker_[op.worker], op.target);
    for (; s < successor_offsets_[id + 1]; ++s) {
      const OpId next = successors_[s];
      if (op.posted && states_[next].worker == op.worker) continue;  // went on when the send returned
      if (handed_off_by_[next] == id && latency_ns > 0) {
        release_after(states_[next].worker, next, id, latency_ns);  // on the receiver's core
      } else {
        release(next, id);
      }
    }
    return;
  }
  for (; s < successor_offsets_[id + 1]; ++s) {
    if (!host_ns_.empty() && released_at_host_end(id, successors_[s])) continue;
    release(successors_[s], id);
  }
}

// A send's flow has only its send buffer's bytes left (or never had more):
// the send returns, and what its own worker runs after it (its stream
// successor, a barrier waiting on it) may start, as the executor's send op
// is done once its message is in the socket (SendReturns::kLeft); the
// message still arrives when the flow ends.
void Engine::post(OpId id) {
  OpState& op = states_[id];
  if (op.posted) return;  // only a send's flow posts
  op.posted = true;
  for (int32_t s = successor_offsets_[id]; s < successor_offsets_[id + 1]; ++s) {
    if (states_[successors_[s]].worker == op.worker) release(successors_[s], id);
  }
}

// `by` releases `next` after `delay_ns`: a wait, or, where workers share
// cores, that much of the core work of `worker` (shared_cores.cpp).
void Engine::release_after(int32_t worker, OpId next, OpId by, SimTime delay_ns) {
  if (!core_scheduling_) {
    push(later_ns(now_ns_, delay_ns, by), next, kHandedOff);
  } else if (states_[by].kind == OpKind::kSend && core_computes(core_of_worker_[worker])) {
    pollers_[core_of_worker_[worker]].push_back(Poller{next, by, static_cast<double>(delay_ns)});
  } else {
    add_core_job(worker, next, by, static_cast<double>(delay_ns));
  }
}

void Engine::release(OpId next, OpId by) {
  OpState& successor = states_[next];
  if (--successor.pending == 0) {
    record_.released_by[next] = by;
    on_ready(next);
  }
}

void Engine::push_completions() {
  for (const FlowCompletion& c : completions_) {
    push(c.time_ns, flows_.op(c.flow), kFlowDone | ((c.version | (c.posts ? kFlowPostsBit : 0u)) << 2));
  }
  completions_.clear();
}

SimResult Engine::run() {
  for (OpId id : initially_ready_) on_ready(id);
  int64_t events = 0;
  while (!events_.empty()) {
    const Event event = events_.pop();
    ++events;
    now_ns_ = event.time_ns();
    switch (event.tag & 3u) {
      case kOpEnd:
        if ((event.tag >> 2) != states_[event.op].version) break;  // a compute op or collective rescheduled since
        if (!host_ns_.empty() && is_compute(states_[event.op].kind)) {
          end_work(event.op);  // it ends once its host part has too
          break;
        }
        finish(event.op);
        break;
      case kFlowJoin:
        if (flows_.join(states_[event.op].index, now_ns_, completions_)) {
          push_completions();
          count_crossing_sends();
        } else {
          finish(event.op);  // nothing to move
        }
        break;
      case kHandedOff:
        if (((event.tag >> 2) & kHopArrival) != 0) {
          on_hop_arrival(event.op);
          break;
        }
        if (((event.tag >> 2) & kCoreCheck) != 0) {
          check_core(event.op);
          break;
        }
        if (!host_ns_.empty() && ((event.tag >> 2) & kHostDone) != 0) {
          end_host_part(event.op);
          break;
        }
        if (core_scheduling_) {
          if ((event.tag >> 2) != release_version_[event.op]) break;  // its core's share changed since
          if (end_core_job(event.op) == CoreJob::kHopPiece) {
            end_hop_piece(event.op);
            break;
          }
        }
        release(event.op, handed_off_by_[event.op]);
        break;
      case kFlowDone: {
        const int32_t f = states_[event.op].index;
        const uint32_t version = event.tag >> 2;
        if (!flows_.is_current(f, version & ~kFlowPostsBit)) break;  // rescheduled since
        if ((version & kFlowPostsBit) != 0) {
          flows_.posted(f);
          post(event.op);
          break;
        }
        flows_.leave(f, now_ns_, completions_);
        push_completions();
        count_crossing_sends();
        finish(event.op);
        break;
      }
      default:
        TRAINSIM_CHECK(false, "unknown event kind");
    }
  }
  if (finished_ != op_count_) {
    // validate_plan rules out cycles, so the members of some collective issued
    // their collectives in orders that wait on each other.
    const auto stuck = std::find_if(collectives_.begin(), collectives_.end(),
                                    [](const Collective& c) { return c.ready < c.members; });
    const OpId id = stuck != collectives_.end() ? collective_ops_[stuck->first_slot] : 0;
    TRAINSIM_CHECK(false, plan_.strategy + " plan: the collective of op " + std::to_string(id) + " (" +
                              op_kind_name(plan_.ops[id].kind) + ") never gathers all members");
  }
  result_.events = events;
  states_ = {};  // the summary reads the result and the record only
  result_.workers.assign(plan_.workers.size(), WorkerResult{});
  for (size_t w = 0; w < plan_.workers.size(); ++w) {
    result_.workers[w].peak_memory_bytes = plan_.workers[w].static_bytes + peak_live_bytes_[w];
  }
  summarize_simulation(plan_, record_, result_);
  if (has_work_ && plan_.iterations > 0 && !(result_.iteration_s > 0)) {
    throw InputError(plan_.strategy + " simulation", "an iteration takes under 1 ns, the resolution of its clock",
                     "a profile whose layers take nanoseconds or more");
  }
  return std::move(result_);
}

}  // namespace des_detail

SimResult simulate_plan(const Plan& plan, const Cluster& cluster, const SimOptions& options) {
  try {
    return des_detail::Engine(plan, cluster, options).run();
  } catch (const ClockOverflow& overflow) {
    std::string op = "the run";
    if (overflow.op >= 0 && overflow.op < static_cast<OpId>(plan.ops.size())) {
      const Op& o = plan.ops[overflow.op];
      op = "op " + std::to_string(overflow.op) + " (" + op_kind_name(o.kind) + ", worker " +
           std::to_string(o.worker) + ", iteration " + std::to_string(o.iteration) + ")";
    }
    throw InputError(plan.strategy + " simulation",
                     op + " ends after " + format_seconds(overflow.seconds) +
                         ", past the simulator's clock (2^63 ns, about 292 years)",
                     "a shorter run: fewer --iterations, a smaller batch or --straggler slowdown, or a faster cluster");
  }
}

}  // namespace trainsim
