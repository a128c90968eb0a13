// What a plan asks of a worker's device, counted from its ops: the
// boundaries it sends (between workers of one memory or not), the range
// inputs that come from the host, the range ops, the forwards through the
// loss. The lending device's tests (buffered_cpu_network.hpp) compare the
// stand-in network's counts with them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "sim/plan/plan.hpp"

namespace trainsim::buffered {

inline bool carries_boundary(const Op& op) {
  return op.payload == Payload::kActivation || op.payload == Payload::kInputGradient;
}

// Per worker, the memory its device passes boundaries in (Device::
// shared_memory; -1: none).
using MemoryOf = std::function<int64_t(int32_t worker)>;

// Whether memory `to` reads memory `from` (peer GPUs), from != to.
using MemoryReaches = std::function<bool(int64_t from, int64_t to)>;

// The boundaries sent between workers whose devices pass them device to
// device (`within`: one memory, or with `reaches` a memory reading the
// sender's), or not. With `across_memories`, only those between two
// memories.
inline int64_t boundary_sends(const Plan& plan, const MemoryOf& memory_of = nullptr, bool within = false,
                              const MemoryReaches& reaches = nullptr, bool across_memories = false) {
  int64_t sends = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kSend || !carries_boundary(op)) continue;
    const int64_t from = memory_of ? memory_of(op.worker) : -1;
    const int64_t to = memory_of ? memory_of(op.peer) : -1;
    if (across_memories && from == to) continue;
    const bool passed = from >= 0 && to >= 0 && (from == to || (reaches && reaches(from, to)));
    sends += passed == within;
  }
  return sends;
}

// The range inputs that come from the host: every batch a first forward
// reads, every recompute's (from the input its forward kept there), and
// every boundary received from another worker; the others are read in place.
inline int64_t host_inputs(const Plan& plan) {
  int64_t inputs = 0;
  for (const Op& op : plan.ops) {
    inputs += (op.kind == OpKind::kForward && op.first_layer == 0) || op.kind == OpKind::kRecompute;
    if (op.kind == OpKind::kRecv) inputs += carries_boundary(plan.ops[static_cast<size_t>(op.deps.front())]);
  }
  return inputs;
}

inline int64_t range_ops(const Plan& plan) {
  int64_t ops = 0;
  for (const Op& op : plan.ops) {
    ops += op.kind == OpKind::kForward || op.kind == OpKind::kBackward || op.kind == OpKind::kRecompute;
  }
  return ops;
}

// Per worker, the layers its forwards, backwards and recomputes run (a
// whole-model op's range is every one of `layers`).
inline std::vector<std::vector<uint8_t>> worker_layers(const Plan& plan, int64_t layers) {
  std::vector<std::vector<uint8_t>> held(plan.workers.size(), std::vector<uint8_t>(static_cast<size_t>(layers), 0));
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward && op.kind != OpKind::kRecompute) continue;
    const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;
    const int64_t last = op.last_layer >= 0 ? op.last_layer : layers - 1;
    for (int64_t l = first; l <= last; ++l) held[static_cast<size_t>(op.worker)][static_cast<size_t>(l)] = 1;
  }
  return held;
}

// The forwards through the model's last layer (not the recomputes): each
// loss the host reads.
inline int64_t loss_forwards(const Plan& plan) {
  int32_t last = 0;
  for (const Op& op : plan.ops) last = std::max(last, op.kind == OpKind::kForward ? op.last_layer : 0);
  int64_t n = 0;
  for (const Op& op : plan.ops) n += op.kind == OpKind::kForward && op.last_layer == last;
  return n;
}

inline int64_t ops_of(const Plan& plan, OpKind kind) {
  int64_t n = 0;
  for (const Op& op : plan.ops) n += op.kind == kind;
  return n;
}

}  // namespace trainsim::buffered
