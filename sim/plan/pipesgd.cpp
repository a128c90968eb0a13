// `pipesgd` plan (seed 002, docs/equations.md §1): iterations pipelined K wide.
// Iteration t computes its gradients, compresses them, and AllReduces them
// while iteration t+1 computes; the update with iteration j's gradients runs
// after iteration j+K-1's backward, so iteration t reads weight version
// t-K+1 (staleness K-1). With S segments, backward stops where each S-th of
// the gradients is complete and that segment's AllReduce starts.
#include <algorithm>
#include <string>

#include "model/error.hpp"
#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// Backward in pieces; after the piece starting at a closing layer, the
// segments it completes are sent.
struct Segmentation {
  std::vector<LayerRange> pieces;       // ascending, covering every layer
  std::vector<int64_t> closing_layers;  // per segment, in backward order: the layer completing it
};

// S equal segments of M/S gradient bytes, as eq. (6) assumes: segment j (1..S)
// is complete once backward, from the last layer down, has produced j·M/S
// bytes (the first one where group_gradients_by_bytes(M/S) closes its first
// group); the last once the lowest layer with parameters is done. S = 1 is
// eq. (5)'s sequential communication: one AllReduce after the whole backward.
Segmentation segment_gradients(const Profile& profile, int64_t segments, double gradient_bytes) {
  if (segments == 1) return {{all_layers(profile)}, {0}};
  const double s = static_cast<double>(segments);
  Segmentation seg;
  double produced_bytes = 0;
  int64_t lowest = 0;
  for (int64_t i = static_cast<int64_t>(profile.layers.size()) - 1; i >= 0; --i) {
    const double bytes = profile.layers[static_cast<size_t>(i)].param_bytes;
    if (bytes <= 0) continue;
    produced_bytes += bytes;
    lowest = i;
    while (static_cast<int64_t>(seg.closing_layers.size()) + 1 < segments &&
           produced_bytes >= static_cast<double>(seg.closing_layers.size() + 1) * gradient_bytes / s) {
      seg.closing_layers.push_back(i);
    }
  }
  while (static_cast<int64_t>(seg.closing_layers.size()) < segments) seg.closing_layers.push_back(lowest);
  seg.pieces = split_layers_at(profile, seg.closing_layers);
  return seg;
}


struct PipeSgdPlanSettings : PipeSgdSettings {
  bool communicates = false;  // workers > 1 and there are gradients
  double gradient_bytes = 0;  // the model's, summed once per plan
  double update_s = 0;        // a worker's update (exchanged_update_s)
};

// Half of compression_work_s each way: compression reads fp32 and writes the
// narrow copy, decompression the reverse.
Op codec_op(OpKind kind, int32_t worker, int32_t iteration, double gradient_bytes, LayerRange layers,
            const Cluster& cluster, const std::string& compression) {
  Op op;
  op.kind = kind;
  op.worker = worker;
  op.stage = worker;
  op.iteration = iteration;
  op.first_layer = static_cast<int32_t>(layers.first);
  op.last_layer = static_cast<int32_t>(layers.last);
  op.bytes = gradient_bytes;
  op.work_s = 0.5 * compression_work_s(cluster, compression, gradient_bytes);
  return op;
}

// The AllReduce's encoding for a `compression` setting (none, trunc16, quant8).
Codec codec_of(const std::string& compression) {
  if (compression == "trunc16") return Codec::kTrunc16;
  if (compression == "quant8") return Codec::kQuant8;
  TRAINSIM_CHECK(compression == "none", "pipesgd: compression " + compression);
  return Codec::kNone;
}

// Iteration t's forward and backward on worker w, compressing and
// all-reducing each segment as backward completes it; returns the AllReduces.
std::vector<OpId> add_iteration(PlanBuilder& b, const Profile& profile, ReplicaCompute& compute, const Cluster& cluster,
                                const PipeSgdPlanSettings& set, const Segmentation& seg, int32_t group, int32_t w,
                                int32_t t, int32_t version) {
  const double segment_bytes = set.gradient_bytes / static_cast<double>(set.segments);
  const double wire_bytes = segment_bytes * wire_fraction(set.compression);
  b.add(compute.op(OpKind::kForward, all_layers(profile), w, t, version));
  std::vector<OpId> allreduces;
  size_t next_segment = 0;
  for (auto piece = seg.pieces.rbegin(); piece != seg.pieces.rend(); ++piece) {
    OpId ready = b.add(compute.op(OpKind::kBackward, *piece, w, t, version));
    while (set.communicates && next_segment < seg.closing_layers.size() &&
           seg.closing_layers[next_segment] == piece->first) {
      if (set.compression != "none") {
        ready = b.add(codec_op(OpKind::kCompress, w, t, segment_bytes, *piece, cluster, set.compression));
      }
      Op allreduce = transfer_op(OpKind::kAllReduce, w, t, wire_bytes, *piece, {ready}, group, set.algorithm);
      allreduce.codec = codec_of(set.compression);
      allreduces.push_back(b.add(std::move(allreduce)));
      ++next_segment;
    }
  }
  return allreduces;
}

// Decompresses iteration j's segments as their AllReduces end and applies
// them: the update reading version j (it writes j + 1).
void add_update(PlanBuilder& b, const Profile& profile, const Cluster& cluster, const PipeSgdPlanSettings& set, int32_t w,
                int32_t j, const std::vector<OpId>& allreduces) {
  const double segment_bytes = set.gradient_bytes / static_cast<double>(set.segments);
  if (set.compression != "none") {
    for (OpId allreduce : allreduces) {
      Op decompress = codec_op(OpKind::kDecompress, w, j, segment_bytes, all_layers(profile), cluster, set.compression);
      decompress.deps = {allreduce};
      b.add(std::move(decompress));
    }
  }
  Op update = update_op(set.update_s, all_layers(profile), w, j, j);
  if (!allreduces.empty()) update.deps = {allreduces.back()};
  b.add(std::move(update));
}

}  // namespace

// docs/equations.md §1: per worker, iteration t runs forward and backward on
// version max(0, t-K+1) with its segments' compression and AllReduces (+
// t_sync, added by the simulator), then decompresses and applies iteration
// t-K+1's gradients; after the last iteration the K-1 pending updates drain.
// In steady state this is eq. (5)/(6)'s max(compute, communication) for
// K >= 2 and eq. (2) for K = 1. With `warmup` = W (seed 002 §4), iterations
// t < W are synchronous (version t, applied right after); from W on, t reads
// max(W, t-K+1) and applies t-K+1 once that is >= W.
Plan plan_pipesgd(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_pipesgd, profile, cluster, config, iterations);
  PipeSgdPlanSettings set;
  static_cast<PipeSgdSettings&>(set) = resolve_pipesgd_settings(profile, cluster, config);
  if (set.segments > kMaxPlanSegments) {
    throw InputError("--set segments", "is " + std::to_string(set.segments),
                     "at most " + std::to_string(kMaxPlanSegments) + " for a plan");
  }
  const ModelTotals totals = model_totals(profile);
  set.communicates = set.workers > 1 && totals.param_bytes > 0;
  set.gradient_bytes = totals.param_bytes;
  set.update_s = exchanged_update_s(profile, cluster, set.communicates ? set.workers : 1);
  ReplicaCompute compute(profile);
  const Segmentation seg = segment_gradients(profile, set.segments, totals.param_bytes);
  const int32_t group = set.communicates ? b.group(all_workers(set.workers)) : -1;
  const auto width = static_cast<int32_t>(std::min<int64_t>(set.width, iterations));  // at most T pending
  // Iteration j ends with the update applying its gradients, after iteration
  // j+K-1's backward; the last K-1 updates (once past the warm-up) run back
  // to back after the last backward, so those iterations end in the drain.
  b.set_drain_iterations(set.warmup < iterations ? set.width - 1 : 0);

  // in_flight[j % width][w]: iteration j's AllReduces on worker w, until applied.
  std::vector<std::vector<std::vector<OpId>>> in_flight(
      static_cast<size_t>(width), std::vector<std::vector<OpId>>(static_cast<size_t>(set.workers)));
  auto pending = [&](int32_t j, int32_t w) -> std::vector<OpId>& {
    return in_flight[static_cast<size_t>(j % width)][static_cast<size_t>(w)];
  };
  const auto warmup = static_cast<int32_t>(std::min<int64_t>(set.warmup, iterations));
  for (int32_t t = 0; t < iterations; ++t) {
    // The iteration whose gradients are applied after t's backward (none when below the warm-up's end).
    const int64_t j = t < warmup ? t : t - set.width + 1;
    const auto version = static_cast<int32_t>(t < warmup ? t : std::max<int64_t>(warmup, t - set.width + 1));
    for (int32_t w = 0; w < static_cast<int32_t>(set.workers); ++w) {
      pending(t, w) = add_iteration(b, profile, compute, cluster, set, seg, group, w, t, version);
      if (j >= 0 && (t < warmup || j >= warmup)) {
        add_update(b, profile, cluster, set, w, static_cast<int32_t>(j), pending(static_cast<int32_t>(j), w));
      }
    }
  }
  // Drain: the updates still pending after the last iteration, in order.
  const auto first_pending = static_cast<int32_t>(std::max<int64_t>(warmup, iterations - set.width + 1));
  for (int32_t j = first_pending; j < iterations; ++j) {
    for (int32_t w = 0; w < static_cast<int32_t>(set.workers); ++w) {
      add_update(b, profile, cluster, set, w, j, pending(j, w));
    }
  }
  return std::move(b).build();
}

}  // namespace trainsim
