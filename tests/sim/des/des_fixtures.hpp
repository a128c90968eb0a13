// Small op builders for the simulator tests: plans are built by hand with
// PlanBuilder so each expected time can be derived on paper.
#pragma once

#include <utility>
#include <vector>

#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim::testing_fixtures {

// The plan built so far, simulated on `cluster` with the default options.
inline SimResult simulate_built(PlanBuilder& b, const Cluster& cluster) {
  return simulate_plan(std::move(b).build(), cluster, {});
}

inline Op compute_op(int32_t worker, double work_s, std::vector<OpId> deps = {}, int32_t iteration = 0,
                     OpKind kind = OpKind::kForward) {
  Op op;
  op.kind = kind;
  op.stream = StreamKind::kCompute;
  op.worker = worker;
  op.work_s = work_s;
  op.iteration = iteration;
  op.deps = std::move(deps);
  return op;
}

inline Op send_op(int32_t from, int32_t to, double bytes, std::vector<OpId> deps = {}, int32_t iteration = 0) {
  Op op;
  op.kind = OpKind::kSend;
  op.stream = StreamKind::kSend;
  op.worker = from;
  op.peer = to;
  op.bytes = bytes;
  op.iteration = iteration;
  op.deps = std::move(deps);
  return op;
}

inline Op recv_op(int32_t at, int32_t from, OpId send, int32_t iteration = 0) {
  Op op;
  op.kind = OpKind::kRecv;
  op.stream = StreamKind::kRecv;
  op.worker = at;
  op.peer = from;
  op.iteration = iteration;
  op.deps = {send};
  return op;
}

// kCopyToHost, kCopyToDevice or kHostAccumulate on its own stream.
inline Op host_op(int32_t worker, OpKind kind, double bytes, std::vector<OpId> deps = {}) {
  Op op;
  op.kind = kind;
  op.stream = kind == OpKind::kCopyToHost     ? StreamKind::kDeviceToHost
              : kind == OpKind::kCopyToDevice ? StreamKind::kHostToDevice
                                              : StreamKind::kHost;
  op.worker = worker;
  op.bytes = bytes;
  op.deps = std::move(deps);
  return op;
}

// kAllReduce, kBroadcast or kBarrier on the send stream.
inline Op collective_op(int32_t worker, OpKind kind, int32_t group, double bytes, std::vector<OpId> deps = {},
                        int32_t iteration = 0) {
  Op op;
  op.kind = kind;
  op.stream = StreamKind::kSend;
  op.worker = worker;
  op.group = group;
  op.bytes = bytes;
  op.iteration = iteration;
  op.deps = std::move(deps);
  return op;
}

}  // namespace trainsim::testing_fixtures
