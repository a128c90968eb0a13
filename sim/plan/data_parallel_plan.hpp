// What the data-parallel plan generators share (single, dp-ps, dp-ring,
// dp-overlap, pipesgd, cgdp, parallax): a builder whose workers carry the cost
// model's static memory, a replica's forward/backward/update ops over layer
// ranges, communication ops, point-to-point transfers as Send/Recv pairs,
// and where the machines' first workers sit.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/strategy_config.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// A builder for the strategy's replicas training `iterations` iterations:
// workers, samples per iteration and each worker's static memory (all of its
// DeviceMemory but the activations, which forwards allocate and backwards
// free) as the strategy's cost model `predict` has them. The model runs on a
// copy of `config`; the generator reads its settings from `config` itself.
inline PlanBuilder data_parallel_builder(CostModel predict, const Profile& profile, const Cluster& cluster,
                                         const StrategyConfig& config, int32_t iterations) {
  StrategyConfig model_config = config;
  const Prediction prediction = predict(profile, cluster, model_config);
  TRAINSIM_CHECK(iterations >= 1, prediction.strategy + ": a plan trains at least one iteration");
  // Every replica runs at least a forward, a backward and an update per iteration.
  check_plan_ops(prediction.strategy, 3.0 * static_cast<double>(prediction.workers) * iterations,
                 std::to_string(prediction.workers) + " workers x " + std::to_string(iterations) + " iterations x 3",
                 "fewer --iterations or workers");
  TRAINSIM_CHECK(prediction.memory.size() == static_cast<size_t>(prediction.workers),
                 prediction.strategy + ": one memory entry per worker");
  PlanBuilder builder(prediction.strategy, static_cast<int32_t>(prediction.workers), iterations,
                      prediction.samples_per_iteration);
  for (int32_t w = 0; w < static_cast<int32_t>(prediction.workers); ++w) {
    const DeviceMemory& m = prediction.memory[static_cast<size_t>(w)];
    builder.worker(w).static_bytes = m.total_bytes() - m.activations_bytes;
  }
  return builder;
}

inline LayerRange all_layers(const Profile& profile) { return {0, static_cast<int64_t>(profile.layers.size()) - 1}; }

// Ranges covering every layer in ascending order, a new one starting at layer
// 0 and at each of `firsts` (duplicates and out-of-range entries ignored).
inline std::vector<LayerRange> split_layers_at(const Profile& profile, std::vector<int64_t> firsts) {
  const int64_t layer_count = static_cast<int64_t>(profile.layers.size());
  firsts.push_back(0);
  std::sort(firsts.begin(), firsts.end());
  firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
  std::vector<LayerRange> ranges;
  for (size_t k = 0; k < firsts.size(); ++k) {
    if (firsts[k] < 0 || firsts[k] >= layer_count) continue;
    const int64_t next = k + 1 < firsts.size() ? std::min(firsts[k + 1], layer_count) : layer_count;
    ranges.push_back({firsts[k], next - 1});
  }
  return ranges;
}

// Memory a forward over `range` allocates and its backward frees: the
// layers' activations, plus the largest workspace on the range holding layer
// 0 (allocated first, freed last), so a whole pass holds what replica_memory
// counts for one batch in flight.
inline double activation_bytes_of(const Profile& profile, LayerRange range) {
  const double workspace_bytes = range.first == 0 ? model_totals(profile).workspace_bytes : 0.0;
  return range_totals(profile, range.first, range.last).activation_bytes + workspace_bytes;
}

// Compute op of replica `worker` over `range`: kForward or kBackward, its
// time the layers' sum from the profile, reading weight version `version`.
inline Op replica_compute_op(OpKind kind, const Profile& profile, LayerRange range, int32_t worker, int32_t iteration,
                             int32_t version) {
  TRAINSIM_CHECK(kind == OpKind::kForward || kind == OpKind::kBackward, "replica compute is forward or backward");
  const ModelTotals t = range_totals(profile, range.first, range.last);
  Op op;
  op.kind = kind;
  op.worker = worker;
  op.stage = worker;
  op.iteration = iteration;
  op.weight_version = version;
  op.first_layer = static_cast<int32_t>(range.first);
  op.last_layer = static_cast<int32_t>(range.last);
  op.work_s = kind == OpKind::kForward ? t.forward_s : t.backward_s;
  (kind == OpKind::kForward ? op.alloc_bytes : op.free_bytes) = activation_bytes_of(profile, range);
  return op;
}

// replica_compute_op with each range's sums taken from the profile once:
// generators write a compute op per worker, iteration and range, and summing
// the layers for every one made a plan cost ops × layers.
class ReplicaCompute {
 public:
  explicit ReplicaCompute(const Profile& profile) : profile_(profile) {}
  Op op(OpKind kind, LayerRange range, int32_t worker, int32_t iteration, int32_t version) {
    auto [it, added] = memo_.try_emplace({range.first, range.last});
    if (added) {
      it->second = {replica_compute_op(OpKind::kForward, profile_, range, 0, 0, 0),
                    replica_compute_op(OpKind::kBackward, profile_, range, 0, 0, 0)};
    }
    TRAINSIM_CHECK(kind == OpKind::kForward || kind == OpKind::kBackward, "replica compute is forward or backward");
    Op op = it->second[kind == OpKind::kBackward ? 1 : 0];
    op.worker = worker;
    op.stage = worker;
    op.iteration = iteration;
    op.weight_version = version;
    return op;
  }

 private:
  const Profile& profile_;
  std::map<std::pair<int64_t, int64_t>, std::array<Op, 2>> memo_;
};

// The optimizer step of the replica's layers taking `work_s` (the cost
// models' range_update_s), reading version `version` (it writes version + 1).
inline Op update_op(double work_s, LayerRange layers, int32_t worker, int32_t iteration, int32_t version) {
  Op op;
  op.kind = OpKind::kUpdate;
  op.worker = worker;
  op.stage = worker;
  op.iteration = iteration;
  op.weight_version = version;
  op.first_layer = static_cast<int32_t>(layers.first);
  op.last_layer = static_cast<int32_t>(layers.last);
  op.work_s = work_s;
  return op;
}

// A communication op without a peer: kAllReduce/kBroadcast/kBarrier (kSend
// stream, `group` set), kCopyToHost, kCopyToDevice or kHostAccumulate (their
// own streams), carrying `bytes` of the gradients of `layers`.
inline Op transfer_op(OpKind kind, int32_t worker, int32_t iteration, double bytes, LayerRange layers,
                      std::vector<OpId> deps, int32_t group = -1,
                      CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing) {
  Op op;
  op.kind = kind;
  switch (kind) {
    case OpKind::kCopyToHost:
      op.stream = StreamKind::kDeviceToHost;
      break;
    case OpKind::kCopyToDevice:
      op.stream = StreamKind::kHostToDevice;
      break;
    case OpKind::kHostAccumulate:
      op.stream = StreamKind::kHost;
      break;
    default:
      TRAINSIM_CHECK(is_collective(kind), "transfer_op takes collectives, copies and host accumulation");
      op.stream = StreamKind::kSend;
  }
  op.worker = worker;
  op.iteration = iteration;
  op.bytes = bytes;
  op.first_layer = static_cast<int32_t>(layers.first);
  op.last_layer = static_cast<int32_t>(layers.last);
  op.group = group;
  op.algorithm = algorithm;
  op.deps = std::move(deps);
  return op;
}

struct Transfer {
  OpId send = -1;  // on the sender's kSend stream
  OpId recv = -1;  // on the receiver's kRecv stream; consumers depend on it
};

// `bytes` of `payload` from worker `from` to worker `to` once `deps` have ended.
inline Transfer add_transfer(PlanBuilder& builder, Payload payload, int32_t from, int32_t to, int32_t iteration,
                             double bytes, LayerRange layers, std::vector<OpId> deps) {
  Op send;
  send.kind = OpKind::kSend;
  send.payload = payload;
  send.stream = StreamKind::kSend;
  send.worker = from;
  send.peer = to;
  send.iteration = iteration;
  send.bytes = bytes;
  send.first_layer = static_cast<int32_t>(layers.first);
  send.last_layer = static_cast<int32_t>(layers.last);
  send.deps = std::move(deps);
  Transfer t;
  t.send = builder.add(send);
  Op recv = send;
  recv.kind = OpKind::kRecv;
  recv.stream = StreamKind::kRecv;
  recv.worker = to;
  recv.peer = from;
  recv.bytes = 0;  // the Send carries the bytes
  recv.deps = {t.send};
  t.recv = builder.add(recv);
  return t;
}

// The first worker of each machine the `workers` span (machines filled in
// order): where a machine's host-side work (host accumulation, a parameter
// server) is put.
inline std::vector<int32_t> machine_first_workers(const Cluster& cluster, int64_t workers) {
  std::vector<int32_t> firsts;
  int32_t first = 0;
  for (int64_t count : workers_per_machine(cluster, workers)) {
    firsts.push_back(first);
    first += static_cast<int32_t>(count);
  }
  return firsts;
}

inline int32_t machine_of(const Cluster& cluster, int32_t worker) {
  return static_cast<int32_t>(worker / cluster.devices_per_machine);
}

// The workers 0..workers-1, a collective group over all of them.
inline std::vector<int32_t> all_workers(int64_t workers) {
  std::vector<int32_t> members(static_cast<size_t>(workers));
  for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) members[static_cast<size_t>(w)] = w;
  return members;
}

}  // namespace trainsim
