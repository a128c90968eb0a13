// `1f1b` (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's pipeline
// schedule): the mini-batch's M micro-batches run through the stages one
// forward, one backward at a time once each stage has admitted its warm-up,
// then a flush: every stage updates once, so no gradient is stale, and stage
// k holds at most K − k micro-batches' activations instead of GPipe's M.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"

namespace trainsim {

// Iteration (docs/equations.md §5, 1F1B with a flush): the first
// micro-batch's forward through every stage and link and its backward back,
// Σ_k (f_k + b_k) + 2·Σ τ_j (τ_j a hop's bytes over its bandwidth plus its
// latency), then M − 1 periods P of the steady state, then max_k (W^r_k +
// U_k) and the barrier. Stage k admits K − k − 1 micro-batches before its
// first backward, so the round trip of micro-batch j from stage k to the
// last stage and back must fit in its K − k periods (where K − k ≤ M):
//   P = max_k max(f_k + b_k (+ its hand-offs), [Σ_{i≥k} (f_i + b_i) + 2·Σ_{k≤j<K−1} τ_j] / (K − k)),
// and no faster than a link direction carries one micro-batch's bytes. With
// K equal stages and no transfers: (M + K − 1)·(f + b), GPipe's.
namespace {

// Interleaved 1F1B (`chunks` v > 1; Narayanan et al. 2021 §2.2.2): device
// d's micro-batch step S_d is the forward and backward of its v chunks; M
// steps at the pace P = max_d S_d and a bubble of (K − 1)/v of one, plus
// the first micro-batch's hops there and back; then the updates and the
// barrier. Device d keeps the activations of its warm-up's forwards and the
// one after, min(2(K − d − 1) + (v − 1)·K + 1, M·v) chunk micro-batches
// (all M·v where M = K), each of its chunk.
Prediction predict_interleaved(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int64_t chunks) {
  Prediction p;
  p.strategy = "1f1b";
  const Pipeline pipe = resolve_interleaved_pipeline(profile, cluster, config, p.notes, chunks);
  const int64_t devices = pipe.devices;
  const int64_t m = resolve_microbatches(config, devices, profile.batch_size, p.notes);
  check_interleaved_microbatches(chunks, m, devices);
  const double mf = static_cast<double>(m), v = static_cast<double>(chunks), k = static_cast<double>(devices);
  std::vector<double> step(static_cast<size_t>(devices), 0.0), update(static_cast<size_t>(devices), 0.0);
  for (size_t s = 0; s < pipe.stages.size(); ++s) {
    const PipelineStage& st = pipe.stages[s];
    const auto d = static_cast<size_t>(st.first_device);
    step[d] +=
        scaled_s(st.forward_s, st.forward_fixed_s, 1.0 / mf) + scaled_s(st.backward_s, st.backward_fixed_s, 1.0 / mf);
    update[d] += st.update_s;
  }
  double pace_s = *std::max_element(step.begin(), step.end());
  const double compute_pace_s = pace_s;
  double hops_s = 0;
  for (const StageBoundary& b : pipe.boundaries) {
    pace_s = std::max(pace_s, v * b.bytes / mf / b.link.bandwidth_bytes_per_s);
    hops_s += 2 * transfer_s(b.bytes / mf, b.link);
  }
  const double flush_s = *std::max_element(update.begin(), update.end());
  const double barrier = barrier_s(devices, cluster.collective.sync_s);
  p.iteration_s = (mf + (k - 1) / v) * pace_s + hops_s + flush_s + barrier;
  const double compute_only_s = (mf + (k - 1) / v) * compute_pace_s + flush_s;
  std::vector<Breakdown> per_device;
  std::vector<DeviceMemory> memory(static_cast<size_t>(devices));
  for (int64_t d = 0; d < devices; ++d) {
    per_device.push_back(device_breakdown(p.iteration_s,
                                          mf * step[static_cast<size_t>(d)] + update[static_cast<size_t>(d)], barrier,
                                          p.iteration_s - compute_only_s - barrier));
    // The forwards before its first backward, counted by chunk (task t runs chunk (t mod Kv) div K).
    const int64_t total = m * chunks;
    const int64_t held = m == devices ? total : std::min(2 * (devices - d - 1) + (chunks - 1) * devices + 1, total);
    std::vector<double> in_flight(static_cast<size_t>(chunks), 0.0);
    for (int64_t t = 0; t < held; ++t) in_flight[static_cast<size_t>((t % (devices * chunks)) / devices)] += 1;
    for (size_t s = static_cast<size_t>(d); s < pipe.stages.size(); s += static_cast<size_t>(devices)) {
      const DeviceMemory chunk =
          stage_memory(profile, pipe.stages[s], in_flight[s / static_cast<size_t>(devices)] / mf);
      DeviceMemory& all = memory[static_cast<size_t>(d)];
      all.weights_bytes += chunk.weights_bytes;
      all.gradients_bytes += chunk.gradients_bytes;
      all.optimizer_bytes += chunk.optimizer_bytes;
      all.activations_bytes += chunk.activations_bytes;
    }
  }
  Breakdown sum;
  for (const Breakdown& b : per_device) {
    sum.compute_s += b.compute_s / k;
    sum.exposed_comm_s += b.exposed_comm_s / k;
    sum.idle_transfer_s += b.idle_transfer_s / k;
    sum.idle_imbalance_s += b.idle_imbalance_s / k;
  }
  p.breakdown = sum;
  p.workers = devices;
  p.samples_per_iteration = static_cast<double>(profile.batch_size);
  p.memory = memory;
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace

Prediction predict_1f1b(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t chunks = config.get_int("chunks", 1, 1);
  if (chunks > 1) return predict_interleaved(profile, cluster, config, chunks);
  Prediction p;
  p.strategy = "1f1b";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kGpipePartition);
  const int64_t m = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, p.notes);
  const double mf = static_cast<double>(m);
  const double handoff = cluster.device.handoff_s;
  const int64_t stages = pipe.stage_count();
  std::vector<double> step(static_cast<size_t>(stages)), hop(static_cast<size_t>(stages), 0.0);
  double path_s = 0, pace_s = 0, compute_pace_s = 0;
  for (int64_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    const double r = static_cast<double>(s.replicas);
    step[k] =
        (scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / mf) + scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / mf)) / r;
    const double handoffs = (k + 1 < stages ? handoff : 0.0) + (k > 0 ? handoff : 0.0);
    path_s += step[k];
    pace_s = std::max(pace_s, step[k] + handoffs / r);
    compute_pace_s = std::max(compute_pace_s, step[k]);
  }
  for (size_t j = 0; j < pipe.boundaries.size(); ++j) {
    const StageBoundary& b = pipe.boundaries[j];
    hop[j] = transfer_s(b.bytes / mf, b.link);
    pace_s = std::max(pace_s, b.bytes / mf / b.link.bandwidth_bytes_per_s);
    path_s += 2 * hop[j];
  }
  // The round trips from each stage to the last and back, on the stages
  // whose warm-up leaves a forward to run after the first backward (K − k ≤ M).
  double round_trip_s = 0;
  for (int64_t k = stages - 1; k >= 0; --k) {
    round_trip_s += step[k] + (k + 1 < stages ? 2 * hop[k] : 0.0);
    if (stages - k <= m) pace_s = std::max(pace_s, round_trip_s / static_cast<double>(stages - k));
  }
  double flush_s = 0;
  for (const PipelineStage& s : pipe.stages) flush_s = std::max(flush_s, s.weight_sync_s + s.update_s);
  const double barrier = barrier_s(pipe.devices, cluster.collective.sync_s);
  p.iteration_s = path_s + (mf - 1) * pace_s + flush_s + barrier;
  double compute_path_s = 0;
  for (const double t : step) compute_path_s += t;
  const double compute_only_s = compute_path_s + (mf - 1) * compute_pace_s + flush_s;

  // A replica's micro-batches in flight: its warm-up, K − k, or all it runs.
  finish_flushed_pipeline(
      p, profile, pipe, m, barrier, compute_only_s,
      [&pipe, mf, stages](int64_t k) {
        const double runs = std::ceil(mf / static_cast<double>(pipe.stages[static_cast<size_t>(k)].replicas));
        return std::min(static_cast<double>(stages - k), runs) / mf;
      },
      config);
  return p;
}

}  // namespace trainsim
