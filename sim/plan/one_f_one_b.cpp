// `1f1b` plan (PipeDream-Flush; Megatron-LM's schedule): on stage k of K,
// each mini-batch's M micro-batches run as min(K − k − 1, M) forwards of
// warm-up, then one forward and one backward in turn, then the remaining
// backwards; then the flush of `gpipe`: each stage's replicas AllReduce
// their gradients, every stage updates once, and a barrier of all workers
// closes the mini-batch. Every op of mini-batch i reads weight version i.
// With `chunks` v > 1, Megatron-LM's interleaved 1F1B over v chunks a device.
#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/cost/common.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {

namespace {

// Interleaved 1F1B (Narayanan et al. 2021 §2.2.2, as Megatron-LM orders
// it): device d of K runs the m·v virtual micro-batches of its v chunks,
// forward task i on chunk (i mod Kv) div K, backward task i on chunk
// v − 1 − that, both of micro-batch (i div Kv)·K + i mod K; it warms up
// with min(2(K − d − 1) + (v − 1)·K, m·v) forwards (all of them when
// m = K), then one forward and one backward in turn, then drains.
void interleaved_iteration(PipelinePlanWriter& w, int32_t devices, int32_t chunks, int32_t m, int32_t i) {
  for (int32_t d = 0; d < devices; ++d) {
    // A worker's weights move one version an update: mini-batch i reads
    // version v·i, and chunk c's update turns v·i + c into v·i + c + 1.
    const int32_t version = chunks * i;
    for (const InterleavedTask& t : interleaved_1f1b_order(devices, chunks, m, d)) {
      if (t.forward) w.forward(t.stage, i, t.microbatch, version);
      if (!t.forward) w.backward(t.stage, i, t.microbatch, version);
    }
    for (int32_t c = 0; c < chunks; ++c) w.update(d, i, version + c, {}, c * devices + d);
    w.barrier(d, i);
  }
}

}  // namespace

std::vector<InterleavedTask> interleaved_1f1b_order(int32_t devices, int32_t chunks, int32_t m, int32_t d) {
  const int32_t group = devices * chunks, total = m * chunks;
  const auto task = [&](int32_t n, bool forward) {
    const int32_t chunk = (n % group) / devices;
    return InterleavedTask{forward, (forward ? chunk : chunks - 1 - chunk) * devices + d,
                           (n / group) * devices + n % devices};
  };
  const int32_t warmup = m == devices ? total : std::min(2 * (devices - d - 1) + (chunks - 1) * devices, total);
  std::vector<InterleavedTask> order;
  for (int32_t n = 0; n < warmup; ++n) order.push_back(task(n, true));
  for (int32_t n = 0; n < total - warmup; ++n) {
    order.push_back(task(warmup + n, true));
    order.push_back(task(n, false));
  }
  for (int32_t n = total - warmup; n < total; ++n) order.push_back(task(n, false));
  return order;
}

// The iteration the cost model times (docs/equations.md §5); a stage's
// replicas take micro-batch mb in turn (mb mod r), each in the stage's order.
// With `chunks` v > 1, interleaved 1F1B over v·K virtual stages.
Plan plan_1f1b(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const int64_t chunks = config.get_int("chunks", 1, 1);
  const Pipeline pipe = chunks > 1 ? resolve_interleaved_pipeline(profile, cluster, config, notes, chunks)
                                   : resolve_pipeline(profile, cluster, config, notes, kGpipePartition);
  const int64_t microbatches =
      resolve_microbatches(config, static_cast<int64_t>(pipe.devices), profile.batch_size, notes);
  check_interleaved_microbatches(chunks, microbatches, pipe.devices);
  PipelinePlanWriter w("1f1b", profile, pipe, iterations, microbatches);  // checks the plan's size first
  const auto m = static_cast<int32_t>(microbatches);
  const int32_t stages = w.stage_count();
  std::vector<double> held(static_cast<size_t>(pipe.devices), 0.0);
  for (int32_t k = 0; k < stages; ++k) {
    const PipelineStage& s = pipe.stages[k];
    // Weights, gradients and optimizer state; the ops allocate the activations of what is in flight.
    const double bytes = static_bytes(replica_memory(profile, s.layers.first, s.layers.last, 0));
    for (int32_t j = 0; j < w.replicas(k); ++j) held[static_cast<size_t>(w.replica_worker(k, j))] += bytes;
  }
  for (int32_t d = 0; d < static_cast<int32_t>(pipe.devices); ++d)
    w.worker(d).static_bytes = held[static_cast<size_t>(d)];
  for (int32_t i = 0; i < iterations; ++i) {
    if (chunks > 1) {
      interleaved_iteration(w, static_cast<int32_t>(pipe.devices), static_cast<int32_t>(chunks), m, i);
      continue;
    }
    for (int32_t k = 0; k < stages; ++k) {
      const int32_t warmup = std::min(stages - k - 1, m);
      for (int32_t mb = 0; mb < warmup; ++mb) w.forward(k, i, mb, i);
      for (int32_t mb = 0; mb < m - warmup; ++mb) {
        w.forward(k, i, mb + warmup, i);
        w.backward(k, i, mb, i);
      }
      for (int32_t mb = m - warmup; mb < m; ++mb) w.backward(k, i, mb, i);
    }
    for (int32_t k = 0; k < stages; ++k) {
      for (int32_t j = 0; j < w.replicas(k); ++j) w.synchronised_update(w.replica_worker(k, j), i, i);
    }
    for (int32_t worker = 0; worker < static_cast<int32_t>(pipe.devices); ++worker) w.barrier(worker, i);
  }
  return std::move(w).build();
}

}  // namespace trainsim
