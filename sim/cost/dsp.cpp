// `dsp`: Diversely Stale Parameters (seed 001 §3; docs/equations.md §8). K blocks
// on K devices, decoupled by FIFO queues: block k keeps the inputs of 1+m_k
// batches (M_k), outputs of 1+p_k (P_k) and error gradients of 1+q_k (Q_k),
// and every step runs a forward, a recomputation and a backward of different
// batches, so no block waits on another's pass of the same batch.
#include <algorithm>

#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {

// Steady state, seed 001 §3.3: each step every block takes one batch from each
// queue, so a batch leaves per max over blocks of the step time, or per the
// slowest boundary when a link is slower (the queues overlap communication
// with computation). Block k's step is F_k + R_k + B_k + U_k. The recompute
// R_k = F_k rebuilds the activations of the batch whose backward is due, with
// the block's current (backward) parameters (eq. 5); it runs overlapped with
// the forward, fused into the same step, but its FLOPs still occupy the
// device, so it is charged as compute. The paper's ideal O((T_F + T_B)/K)
// drops that constant. A block with m_k = 0 (the last, by default) runs the
// backward of the batch it just forwarded and needs no recompute.
Prediction predict_dsp(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "dsp";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kDspPartition, /*read_replicas=*/false);
  const int64_t blocks = pipe.stage_count();
  const DspQueues queues = resolve_dsp_queues(config, blocks, p.notes);

  std::vector<double> step_s;
  double slowest_block_s = 0, slowest_link_s = 0;
  for (int64_t k = 0; k < blocks; ++k) {
    const PipelineStage& s = pipe.stages[k];
    const double recompute_s = queues.m[k] > 0 ? s.forward_s : 0.0;
    step_s.push_back(s.compute_s() + recompute_s);
    slowest_block_s = std::max(slowest_block_s, step_s.back());
  }
  for (const StageBoundary& b : pipe.boundaries) slowest_link_s = std::max(slowest_link_s, b.comm_s);
  p.iteration_s = std::max(slowest_block_s, slowest_link_s);
  p.notes.push_back(
      "recompute: blocks with m_k > 0 run their forward twice per step (once recomputed for the backward, "
      "overlapped with the forward); the time counts it as compute, where the paper's ideal (T_F + T_B)/K does not");

  std::vector<Breakdown> per_stage;
  std::vector<DeviceMemory> memory;
  for (int64_t k = 0; k < blocks; ++k) {
    const PipelineStage& s = pipe.stages[k];
    per_stage.push_back(device_breakdown(p.iteration_s, step_s[k], 0.0, p.iteration_s - slowest_block_s));
    // One batch's activations (recomputed for its backward), the queued inputs
    // (the data input of block 0 is not in the profile), outputs and error
    // gradients. One parameter version: eq. 5 uses the current parameters
    // both at the forward and at the recompute, so nothing is stashed.
    DeviceMemory mem = stage_memory(profile, s, 1.0);
    mem.activations_bytes += static_cast<double>(queues.m[k]) * s.input_bytes +
                             static_cast<double>(1 + queues.p[k] + 1 + queues.q[k]) * s.output_bytes;
    memory.push_back(mem);
  }
  p.breakdown = average_breakdown(pipe, per_stage);
  p.workers = pipe.devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = per_device_memory(pipe, memory);
  // Layer-wise staleness Δt_k = m_k (docs/equations.md §8): the largest of the
  // blocks with parameters (block 0's, unless it holds none).
  p.staleness = largest_weighted_lag(pipe, [&](int64_t k) { return queues.m[static_cast<size_t>(k)]; });
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
