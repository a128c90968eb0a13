// `dsp`: Diversely Stale Parameters (seed 001 §3; EQUATIONS.md §8). K blocks
// on K devices, decoupled by FIFO queues: block k keeps the inputs of 1+m_k
// batches (M_k), outputs of 1+p_k (P_k) and error gradients of 1+q_k (Q_k),
// and every step runs a forward, a recomputation and a backward of different
// batches, so no block waits on another's pass of the same batch.
#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

struct Queues {
  std::vector<int64_t> p;  // output queue P_k holds 1 + p_k batches
  std::vector<int64_t> m;  // input queue M_k holds 1 + m_k; m_k is block k's staleness Δt_k (§3.3)
  std::vector<int64_t> q;  // gradient queue Q_k holds 1 + q_k; follows from p and m
};

std::vector<int64_t> read_lengths(const nlohmann::json& queues, const char* key, int64_t blocks) {
  const std::string where = std::string("--set queues: ") + key;
  const std::string expected = std::to_string(blocks) + " integers >= 0, one per block";
  if (!queues.contains(key) || !queues[key].is_array() || static_cast<int64_t>(queues[key].size()) != blocks) {
    throw InputError(where, queues.contains(key) ? "is " + queues[key].dump() : "is missing", expected);
  }
  std::vector<int64_t> lengths;
  for (const auto& x : queues[key]) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0) throw InputError(where, "has " + x.dump(), expected);
    lengths.push_back(x.get<int64_t>());
  }
  return lengths;
}

// Checks a user's queues against §3.2's ordering and derives q. The stale
// timestamps t_0 < ... < t_{K-1} <= t_K < ... < t_{2K-1} give
// Δt_k >= Δt_{k+1} + 2; a batch leaving block k waits through P_k (p_k), one
// step to cross, the blocks above (m_{k+1}) and Q_k (q_k) before its backward
// on block k: m_k = p_k + 1 + m_{k+1} + q_k [reconstructed; it reproduces the
// paper's six settings, e.g. DSP(3,3,0;10,5,0) with q = 1,1].
void derive_gradient_queues(Queues& queues) {
  const int64_t blocks = static_cast<int64_t>(queues.m.size());
  if (queues.p[blocks - 1] != 0) {
    throw InputError("--set queues: p", "ends with " + std::to_string(queues.p[blocks - 1]),
                     "0 for the last block, whose output feeds the loss at once");
  }
  queues.q.assign(static_cast<size_t>(blocks), 0);
  for (int64_t k = 0; k + 1 < blocks; ++k) {
    const int64_t q = queues.m[k] - queues.m[k + 1] - queues.p[k] - 1;
    if (queues.m[k] < queues.m[k + 1] + 2 || q < 0) {
      throw InputError("--set queues: m", "m[" + std::to_string(k) + "] = " + std::to_string(queues.m[k]),
                       "m[k] >= m[k+1] + max(2, p[k] + 1) = " +
                           std::to_string(queues.m[k + 1] + std::max<int64_t>(2, queues.p[k] + 1)));
    }
    queues.q[k] = q;
  }
}

// Key `queues`: {"p": [...], "m": [...]}; default the paper's smallest
// setting DSP(1,...,1,0; 2(K-1),...,2,0), as DSP(1,1,0;4,2,0) for K = 3 in
// its Tables 1-2: each block's staleness the least a forward and a backward
// per step allow.
Queues resolve_queues(StrategyConfig& config, int64_t blocks, std::vector<std::string>& notes) {
  Queues queues;
  if (std::optional<nlohmann::json> raw = config.get_json("queues")) {
    if (!raw->is_object()) throw InputError("--set queues", "is " + raw->dump(), "{\"p\": [...], \"m\": [...]}");
    for (const auto& [key, value] : raw->items()) {
      if (key != "p" && key != "m") throw InputError("--set queues", "has key '" + key + "'", "only p and m");
    }
    queues.p = read_lengths(*raw, "p", blocks);
    queues.m = read_lengths(*raw, "m", blocks);
  } else {
    for (int64_t k = 0; k < blocks; ++k) {
      queues.p.push_back(k + 1 < blocks ? 1 : 0);
      queues.m.push_back(2 * (blocks - 1 - k));
    }
    notes.push_back("queues: the paper's smallest setting DSP(1,...,1,0; 2(K-1),...,2,0)");
  }
  derive_gradient_queues(queues);
  config.record("queues", {{"p", queues.p}, {"m", queues.m}});
  return queues;
}

}  // namespace

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
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, /*read_replicas=*/false);
  const int64_t blocks = pipe.stage_count();
  const Queues queues = resolve_queues(config, blocks, p.notes);

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
  // Layer-wise staleness Δt_k = m_k (EQUATIONS.md §8); the largest is block 0's.
  p.staleness = *std::max_element(queues.m.begin(), queues.m.end());
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
