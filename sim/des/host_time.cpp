// A GPU worker's host time per compute op (DeviceSpec::host_per_op): the
// host queues an op's kernels, and the executor does its own work around
// them, while the GPU runs them. An op holds its worker's host for its
// kind's fixed_s + layers · per_layer_s and its device for its work, and
// ends when both are done. As the executor's host goes on once it has
// queued an op, the worker's next compute ops start when its host part
// ends, their work queued on the device after its work; other ops wait
// for its end (docs/simulator.md, "A GPU worker's host").
#include <algorithm>

#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {
namespace {

enum HostPart : uint8_t {
  kWorkDone = 1,       // its work has left the device
  kHostPartDone = 2,   // its host part has ended
  kReleasedEarly = 4,  // the compute ops of its worker waiting for it went on at its host part's end
};

}  // namespace

// Each forward (and recompute), backward and update its host time, held in
// host_ns_ until it starts; nothing where the device prices none, or where
// workers share a computer's cores (CPU threads, whose work is the host's).
void Engine::price_host() {
  const DeviceSpec::HostPerOp& host = cluster_.device.host_per_op;
  if (!host.any() || core_scheduling_) return;
  host_ns_.assign(op_count_, 0);
  host_parts_.assign(op_count_, 0);
  working_.assign(plan_.workers.size(), -1);
  queued_work_.assign(plan_.workers.size(), {});
  for (OpId id = 0; id < op_count_; ++id) {
    if (host_kind(plan_.ops[id].kind) != HostKind::kNone)
      host_ns_[id] = duration_ns(op_host_s(host, plan_.ops[id]), id);
  }
}

// A compute op has started: its host part runs until host_ns_ says, and
// its work starts now (true) unless its worker's work before it still runs
// (false: it is queued after that).
bool Engine::start_host_part(OpId id) {
  host_ns_[id] = later_ns(now_ns_, host_ns_[id], id);
  push(host_ns_[id], id, kHandedOff | (kHostDone << 2));  // at once for one without (a codec's)
  const int32_t worker = states_[id].worker;
  if (working_[worker] >= 0) {
    queued_work_[worker].push_back(id);
    return false;
  }
  working_[worker] = id;
  return true;
}

// Whether `next` is a compute op of `id`'s worker that went on at id's
// host part's end, before its work was done.
bool Engine::released_at_host_end(OpId id, OpId next) const {
  return (host_parts_[id] & kReleasedEarly) != 0 && is_compute(states_[next].kind) &&
         states_[next].worker == states_[id].worker;
}

// Its host part has ended: with its work done, the op ends; else its
// worker's compute ops waiting for it go on (their work queued after its).
void Engine::end_host_part(OpId id) {
  host_parts_[id] |= kHostPartDone;
  if ((host_parts_[id] & kWorkDone) != 0) {
    finish(id);
    return;
  }
  if (states_[id].hands_off) return;  // its stream goes on the hand-off's time after its end
  host_parts_[id] |= kReleasedEarly;
  for (int32_t s = successor_offsets_[id]; s < successor_offsets_[id + 1]; ++s) {
    if (released_at_host_end(id, successors_[s])) release(successors_[s], id);
  }
}

// Its work is done: the op ends once its host part has too (first, so
// what it frees goes before what the next work allocates), and the device
// goes to the next work its worker queued.
void Engine::end_work(OpId id) {
  leave_device(id);
  host_parts_[id] |= kWorkDone;
  if ((host_parts_[id] & kHostPartDone) != 0) finish(id);
  const int32_t worker = states_[id].worker;
  working_[worker] = -1;
  if (!queued_work_[worker].empty()) {
    working_[worker] = queued_work_[worker].front();
    queued_work_[worker].pop_front();
    start_work(working_[worker]);
  }
}

// A compute op's work leaves its device or core (where others share it).
void Engine::leave_device(OpId id) {
  const OpState& op = states_[id];
  if (core_shares_[op.worker].running != id) return;  // set where compute shares a core
  core_shares_[op.worker].running = -1;
  if (!core_jobs_.empty()) {
    end_core_job(id);
    if (core_scheduling_) compute_left_core(core_of_worker_[op.worker], id);
  }
  if (sharing_) set_computing(op.worker, -1);
}

}  // namespace trainsim::des_detail
