// What the pipeline plan generators (pipedream, pipedream-sync, dualpipe,
// gpipe, dsp) share: workers placed as build_pipeline places the stages,
// compute ops carrying their stage's layers, time and memory, activations and
// gradients between adjacent stages as Send/Recv pairs, the replicas' weight
// AllReduce, barriers, and PipeDream's 1F1B order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// What a worker holds throughout, from a cost model's DeviceMemory: weights,
// gradients, optimizer state and stashed versions. Activations and workspace
// are not in it: the compute ops allocate and free them.
double static_bytes(const DeviceMemory& memory);

// Writes the ops of one pipeline plan. Stage k's replicas are workers
// first_device .. first_device + r_k - 1. Without micro-batches, replicas take
// whole mini-batches in turn (PipeDream: mini-batch i on replica i mod r_k);
// with M micro-batches, the micro-batches of every mini-batch in turn
// (micro-batch m on replica m mod r_k), and one op's compute time,
// activations and boundary bytes are the stage's per-mini-batch figures / M
// (linear in the batch, as the cost models scale them).
//
// Each worker's ops must be written in its program order: a forward or
// backward adds the Recv of its input first (so the kRecv stream runs in the
// order the inputs are consumed), then the compute op, then the Send of its
// output; a Send and its Recv are paired whichever is written first.
class PipelinePlanWriter {
 public:
  // `microbatches` = 0: ops carry no micro-batch (one per mini-batch and stage).
  // Throws InputError first when the plan would pass kMaxPlanOps: per
  // iteration, each micro-batch's forward and backward on every stage and a
  // Send and Recv each way across every boundary (updates come on top).
  PipelinePlanWriter(std::string strategy, const Profile& profile, const Pipeline& pipeline, int32_t iterations,
                     int64_t microbatches = 0);

  const Pipeline& pipeline() const { return pipeline_; }
  int32_t stage_count() const { return static_cast<int32_t>(pipeline_.stages.size()); }
  int32_t iterations() const { return iterations_; }
  int32_t replicas(int32_t stage) const { return static_cast<int32_t>(pipeline_.stages[stage].replicas); }
  // Worker of replica `replica` (0-based) of `stage`.
  int32_t replica_worker(int32_t stage, int32_t replica) const;
  // The worker that runs (stage, iteration, microbatch).
  int32_t worker_of(int32_t stage, int32_t iteration, int32_t microbatch) const;

  // Forward of (stage, iteration, microbatch), reading `weight_version`: after
  // the Recv of its input activations (stage > 0), before the Send of its
  // output (stage < last). Allocates its activations and received input (kept
  // until the matching backward) and, for its duration, the workspace.
  OpId forward(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version);
  // Backward: after the Recv of its output gradient (stage < last), before the
  // Send of its input gradient (stage > 0); frees what the forward kept.
  // With `weight_share` > 0 it computes the input gradient alone (B of the
  // zero-bubble schedules), 1 − weight_share of the stage's backward, and
  // weight_gradients later computes the rest (W), whose inputs (each
  // layer's input and output gradient) are not counted in memory.
  OpId backward(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version, double weight_share = 0);
  OpId weight_gradients(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version,
                        double weight_share);
  // Forward again to rebuild the activations the backward needs (DSP): takes
  // the forward's time, allocates the activations, no transfers.
  OpId recompute(int32_t stage, int32_t iteration, int32_t weight_version);
  // Optimizer step on the worker's layers (U_k of its stage, or of `stage`
  // where a worker holds several: interleaved chunks), reading
  // `weight_version` and producing the next.
  OpId update(int32_t worker, int32_t iteration, int32_t weight_version, std::vector<OpId> deps = {},
              int32_t stage = -1);
  // The worker's share of its stage's data-parallel weight synchronisation
  // (docs/equations.md §4's W^m): one AllReduce op per replica of the stage, of the
  // stage's param_bytes, ring algorithm (the pipeline models read no choice).
  OpId allreduce(int32_t worker, int32_t iteration, std::vector<OpId> deps = {});
  // The update of a worker's stage once its gradients are complete: on a
  // replicated stage, after the replicas' AllReduce, which follows the
  // worker's last compute op; returns the update.
  OpId synchronised_update(int32_t worker, int32_t iteration, int32_t weight_version);
  // A zero-time join of every worker, on the compute stream.
  OpId barrier(int32_t worker, int32_t iteration, std::vector<OpId> deps = {});

  // The Sends the worker issued since the last call (a barrier waits for them to land).
  std::vector<OpId> take_sends(int32_t worker);
  // The last op on the worker's compute stream, as a dependency list (empty if none).
  std::vector<OpId> compute_tail(int32_t worker) const;

  Op& op(OpId id) { return builder_.op(id); }
  PlanWorker& worker(int32_t w) { return builder_.worker(w); }
  // Per-op memory of a stage: activations (kept for backward) and received
  // input of one op, and the workspace a compute op holds while it runs.
  double activation_bytes(int32_t stage) const;
  double input_bytes(int32_t stage) const;
  double workspace_bytes(int32_t stage) const { return workspace_bytes_[stage]; }

  // Checks every Send found its Recv, validates and returns the plan.
  Plan build() &&;

 private:
  enum Direction { kActivations = 0, kGradients = 1 };
  struct TransferEnds {
    OpId send = -1;
    OpId recv = -1;
  };

  int32_t stage_of_worker(int32_t worker) const;
  Op compute_op(OpKind kind, int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version) const;
  size_t transfer_index(Direction direction, int32_t boundary, int32_t iteration, int32_t microbatch) const;
  // The Recv on `worker` of the transfer, from `peer`; returns its id.
  OpId receive(Direction direction, int32_t boundary, int32_t worker, int32_t peer, const Op& consumer);
  void send(Direction direction, int32_t boundary, int32_t worker, int32_t peer, OpId producer);
  OpId add_compute(Op op);

  PlanBuilder builder_;
  const Pipeline& pipeline_;
  int32_t iterations_ = 0;
  int32_t microbatches_ = 0;  // 0: whole mini-batches
  double split_ = 1;          // what one op's times and bytes are divided by: max(1, microbatches)
  std::vector<double> workspace_bytes_;
  std::vector<TransferEnds> transfers_;
  std::vector<std::vector<OpId>> unsettled_sends_;  // per worker, since take_sends
  std::vector<OpId> compute_tail_;                  // per worker: last compute-stream op, -1 if none
  int32_t all_workers_group_ = -1;
};

// Interleaved 1F1B's tasks on device d of K, v chunks a device, M
// micro-batches, in Megatron-LM's order (sim/plan/one_f_one_b.cpp): each a
// forward or backward of virtual stage `stage` (chunk c of device d is
// c·K + d) for `microbatch`.
struct InterleavedTask {
  bool forward = true;
  int32_t stage = 0;
  int32_t microbatch = 0;
};
std::vector<InterleavedTask> interleaved_1f1b_order(int32_t devices, int32_t chunks, int32_t m, int32_t d);

// One task of a worker's pipeline program.
struct PipelineTask {
  bool forward = true;
  int32_t iteration = 0;
};

// PipeDream's 1F1B order for replica `replica` of `stage`: its mini-batches
// are those with iteration ≡ replica (mod r); it admits
// one_f_one_b_in_flight(stage) of them (NOAM at the input stage, S − k
// without replication), then alternates one backward and one forward, then
// drains the remaining backwards.
std::vector<PipelineTask> one_f_one_b_program(const Pipeline& pipeline, int32_t stage, int32_t replica,
                                              int32_t iterations);

// Replicas of a stage apply their gradients together once per round: round t
// of a stage with r replicas holds mini-batches t·r .. t·r + r − 1. The
// number of mini-batches in each round (the last may hold fewer).
std::vector<int32_t> replica_rounds(int32_t iterations, int32_t replicas);

}  // namespace trainsim
