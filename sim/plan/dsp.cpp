// `dsp` plan: Diversely Stale Parameters (seed 001 §3; docs/equations.md §8).
// Block k runs steps; in each it takes one batch from each of its FIFO
// queues: a forward of a new batch, then (m_k > 0) the recomputation and the
// backward of the batch it forwarded m_k steps before, then its update. The
// queue lengths fix which batch each op takes; the Recvs carry the batch
// index, so a block waits only when a queue runs dry.
#include <algorithm>
#include <vector>

#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {
namespace {

// Block k's memory as the cost model counts it: its weights, gradients and
// momentum, and its queues as fixed buffers, 1 + m_k inputs (M_k) and
// 1 + p_k outputs plus 1 + q_k error gradients of the output's size. The
// activations of one batch come and go with the ops.
double block_static_bytes(const Profile& profile, const PipelineStage& s, const DspQueues& queues, size_t k) {
  const DeviceMemory m = replica_memory(profile, s.layers.first, s.layers.last, 0);
  return static_bytes(m) + static_cast<double>(1 + queues.m[k]) * s.input_bytes +
         static_cast<double>(2 + queues.p[k] + queues.q[k]) * s.output_bytes;
}

// Block k's steps (seed 001 §3.3). In the cost model's derivation
// (pipeline_settings.hpp, resolve_dsp_queues) block k+1 forwards a batch p_k + 1 steps
// after block k, and block k runs its backward m_k = p_k + 1 + m_{k+1} + q_k
// steps after its forward: at step t it forwards batch t − D_k,
// D_k = Σ_{j<k} (p_j + 1), and runs the backward of batch t − D_k − m_k. A
// plan has no global step, so what it keeps is each step's pairing, F(f) then
// R(f − m_k), B(f − m_k), U; the Recvs hold each block within the slack
// p_k + 1 + q_k of its queues. Versions count the block's updates, one per
// backward: the forward of f reads max(0, f − m_k) (x_k^{t_k}); the
// recomputation and the backward of b read b, the backward parameters
// x_k^{t_{2K−1−k}} of eq. (5), m_k versions newer than its forward's.
void write_block(PipelinePlanWriter& w, int32_t k, int64_t staleness) {
  const int32_t n = w.iterations();
  const int32_t worker = w.replica_worker(k, 0);
  const double kept_bytes = w.activation_bytes(k) + w.workspace_bytes(k);
  int32_t version = 0;
  for (int64_t step = 0; step < n + std::min<int64_t>(staleness, n); ++step) {
    // Steps n .. staleness - 1 (a queue longer than the run) hold no op: skip them.
    const int64_t f = step < n ? step : step - n + std::max<int64_t>(staleness, n);
    const int64_t backward_of = f - staleness;
    if (f < n) {
      Op& forward = w.op(w.forward(k, static_cast<int32_t>(f), 0, version));
      // Inputs live in M_k (static); with recomputation the forward keeps nothing.
      forward.alloc_bytes = kept_bytes;
      if (staleness > 0) forward.free_bytes = kept_bytes;
    }
    if (backward_of >= 0) {
      const auto b = static_cast<int32_t>(backward_of);
      if (staleness > 0) w.recompute(k, b, version);
      w.op(w.backward(k, b, 0, version)).free_bytes = kept_bytes;
      w.update(worker, b, version);
      ++version;
    }
  }
}

}  // namespace

Plan plan_dsp(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kDspPartition, /*read_replicas=*/false);
  const DspQueues queues = resolve_dsp_queues(config, pipe.stage_count(), notes);
  PipelinePlanWriter w("dsp", profile, pipe, iterations);
  for (int32_t k = 0; k < w.stage_count(); ++k) {
    w.worker(w.replica_worker(k, 0)).static_bytes = block_static_bytes(profile, pipe.stages[k], queues, k);
    write_block(w, k, queues.m[k]);
  }
  Plan plan = std::move(w).build();
  // Block 0 ends each iteration with its backward and update; its last m_0
  // steps forward nothing (the drain), so the last m_0 iterations end there.
  // Declared where at least two iterations are left before them.
  if (iterations - queues.m[0] >= 2) plan.drain_iterations = queues.m[0];
  return plan;
}

}  // namespace trainsim
