// `zb-h1` (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", §3.1): 1F1B
// with every backward split into its input gradient B, which the stage
// before waits for, and its weight gradients W, which the later stages hold
// back (zero_bubble.hpp), so the input gradients climb the pipeline at B a
// stage instead of B + W; then 1f1b's flush.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/collective.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/models.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/cost/zero_bubble.hpp"

namespace trainsim {

std::vector<ZeroBubbleTask> zb_h1_order(int32_t stages, int32_t stage, int32_t microbatches) {
  std::vector<ZeroBubbleTask> order;
  const int32_t warmup = std::min(stages - stage - 1, microbatches);
  int32_t forwards = 0, inputs = 0, weights = 0;
  const auto input = [&] {
    order.push_back({ZeroBubbleTask::kInput, inputs++});
    while (inputs - weights > stage) order.push_back({ZeroBubbleTask::kWeights, weights++});
  };
  while (forwards < warmup) order.push_back({ZeroBubbleTask::kForward, forwards++});
  while (forwards < microbatches) {
    order.push_back({ZeroBubbleTask::kForward, forwards++});
    input();
  }
  while (inputs < microbatches) input();
  while (weights < microbatches) order.push_back({ZeroBubbleTask::kWeights, weights++});
  return order;
}

namespace {

// One direction of a boundary's link: one micro-batch's bytes at a time, in
// the order they are sent.
struct LinkQueue {
  double free_s = 0;
  // When a transfer of `bytes` over `link`, ready at `ready_s`, arrives.
  double send(double ready_s, double bytes, const LinkSpec& link) {
    const double start = std::max(ready_s, free_s);
    free_s = start + bytes / link.bandwidth_bytes_per_s;
    return free_s + link.latency_s;
  }
};

// When the last of the stages' tasks ends, each stage running its tasks in
// zb_h1_order as soon as their inputs have arrived (f, b: a micro-batch's
// forward and backward on each stage). With `transfers`, a boundary's
// direction carries one micro-batch's bytes at a time, then its latency,
// and a task that sends holds its stage `handoff` longer.
double critical_path_s(const Pipeline& pipe, const std::vector<double>& f, const std::vector<double>& b, double share,
                       int32_t mi, double handoff, bool transfers) {
  const auto stages = static_cast<int32_t>(f.size());
  const double mf = static_cast<double>(mi);
  // forward_in[k][j] (backward_in[k][j]): when micro-batch j's activations
  // (output gradient) reach stage k; NaN until sent. Stages advance in
  // turn, each as far as its inputs allow, until every task has run.
  const double unknown = std::nan("");
  std::vector<std::vector<double>> forward_in(static_cast<size_t>(stages), std::vector<double>(mi, unknown));
  std::vector<std::vector<double>> backward_in = forward_in;
  std::vector<LinkQueue> down(pipe.boundaries.size()), up(pipe.boundaries.size());
  std::vector<std::vector<ZeroBubbleTask>> order(static_cast<size_t>(stages));
  for (int32_t k = 0; k < stages; ++k) order[k] = zb_h1_order(stages, k, mi);
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> clock(static_cast<size_t>(stages), 0.0);
  const auto cross = [&](LinkQueue& q, const StageBoundary& bd, double ready) {
    return transfers ? q.send(ready, bd.bytes / mf, bd.link) : ready;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int32_t k = 0; k < stages; ++k) {
      for (; next[k] < order[k].size(); ++next[k]) {
        const ZeroBubbleTask& t = order[k][next[k]];
        const auto j = static_cast<size_t>(t.microbatch);
        double ready = clock[k], work = share * b[k];
        if (t.kind == ZeroBubbleTask::kForward) {
          if (k > 0 && std::isnan(forward_in[k][j])) break;
          if (k > 0) ready = std::max(ready, forward_in[k][j]);
          work = f[k];
        } else if (t.kind == ZeroBubbleTask::kInput) {
          if (k + 1 < stages && std::isnan(backward_in[k][j])) break;
          if (k + 1 < stages) ready = std::max(ready, backward_in[k][j]);
          work = (1 - share) * b[k];
        }
        clock[k] = ready + work;
        if (t.kind == ZeroBubbleTask::kForward && k + 1 < stages) {
          forward_in[k + 1][j] = cross(down[static_cast<size_t>(k)], pipe.boundaries[static_cast<size_t>(k)], clock[k]);
          clock[k] += handoff;
        }
        if (t.kind == ZeroBubbleTask::kInput && k > 0) {
          backward_in[k - 1][j] =
              cross(up[static_cast<size_t>(k - 1)], pipe.boundaries[static_cast<size_t>(k - 1)], clock[k]);
          clock[k] += handoff;
        }
        moved = true;
      }
    }
  }
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace

// Iteration (Qi et al. §3.1, docs/equations.md §5): the schedule's critical
// path without contention. Every stage runs zb_h1_order's tasks in turn, each
// once its input has arrived: a forward f_k after the stage before's output
// crossed its link, a B = (1 − s)·b_k after the stage after's input
// gradient did (s = weight_share), a W = s·b_k after its own B; a task that
// sends holds the stage a hand-off longer. Each link direction carries a
// micro-batch's bytes/M at a time, then its latency. Then max_k (W^r_k +
// U_k) and the barrier. With K equal stages and no transfers it is the
// paper's M·(F + B + W) + (K − 1)·(F + B − W) where W ≤ F, a third of
// 1F1B's bubble (K − 1)·(F + B + W) when F = B = W. Stage k keeps 1F1B's
// min(K − k, M) micro-batches' activations (W's inputs, each layer's input
// and output gradient, not counted).
Prediction predict_zb_h1(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  Prediction p;
  p.strategy = "zb-h1";
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, p.notes, kGpipePartition, /*read_replicas=*/false);
  const int64_t m = resolve_microbatches(config, pipe.stage_count(), profile.batch_size, p.notes);
  const double share = resolve_weight_share(config);
  const double mf = static_cast<double>(m);
  const double handoff = cluster.device.handoff_s;
  const auto stages = static_cast<int32_t>(pipe.stage_count());
  const auto mi = static_cast<int32_t>(m);
  std::vector<double> f(static_cast<size_t>(stages)), b(static_cast<size_t>(stages));
  for (int32_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[static_cast<size_t>(k)];
    f[k] = scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / mf);
    b[k] = scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / mf);
  }
  const double pipeline_s = critical_path_s(pipe, f, b, share, mi, handoff, /*transfers=*/true);
  const double compute_path_s = critical_path_s(pipe, f, b, share, mi, 0, /*transfers=*/false);
  double flush_s = 0;
  for (const PipelineStage& s : pipe.stages) flush_s = std::max(flush_s, s.weight_sync_s + s.update_s);
  const double barrier = barrier_s(pipe.devices, cluster.collective.sync_s);
  p.iteration_s = pipeline_s + flush_s + barrier;
  // Without transfers and hand-offs the same schedule idles less: the
  // difference is what communication exposes.
  const double compute_only_s = compute_path_s + flush_s;
  finish_flushed_pipeline(
      p, profile, pipe, m, barrier, compute_only_s,
      [mf, stages](int64_t k) { return std::min(static_cast<double>(stages - k), mf) / mf; }, config);
  return p;
}

}  // namespace trainsim
