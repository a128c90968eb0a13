// A GPU worker's host time per compute op (DeviceSpec::host_per_op): the
// host queues an op's kernels, and the executor does its own work around
// them, while the GPU runs them. The op holds its worker's host for its
// kind's fixed_s + layers · per_layer_s and the device for its work, and
// ends when both are done: where the host's part is the longer, the device
// is free for the other workers sharing it once the work is done, and the
// op's stream goes on when the host's part ends (docs/simulator.md, "A GPU
// worker's host").
#include <algorithm>

#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {

// Each forward (and recompute), backward and update its host time, held in
// host_ns_ until it starts; nothing where the device prices none.
void Engine::price_host() {
  const DeviceSpec::HostPerOp& host = cluster_.device.host_per_op;
  if (!host.any()) return;
  host_ns_.assign(op_count_, 0);
  for (OpId id = 0; id < op_count_; ++id) {
    const Op& op = plan_.ops[id];
    const DeviceSpec::HostTime* time = nullptr;
    if (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute) time = &host.forward;
    if (op.kind == OpKind::kBackward) time = &host.backward;
    if (op.kind == OpKind::kUpdate) time = &host.update;
    if (time == nullptr) continue;
    const int64_t layers = op.first_layer < 0 ? 0 : std::max(0, op.last_layer - op.first_layer + 1);
    host_ns_[id] = duration_ns(time->seconds(layers), id);
  }
}

// A compute op's work is done (its kOpEnd): true, with the device let go and
// its end moved to its host part's end, where that is still to come.
bool Engine::waits_for_host(OpId id) {
  OpState& op = states_[id];
  if (!is_compute(op.kind) || host_ns_[id] <= now_ns_) return false;
  leave_device(id);
  ++op.version;
  push(host_ns_[id], id, kOpEnd | (op.version << 2));
  return true;
}

// A compute op's work leaves its device or core (where others share it):
// at its end, or earlier when its host part outlasts it.
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
