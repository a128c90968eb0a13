// Inside sim/search: the pieces of the partition search (partition.cpp) that
// its hierarchical form (partition_hierarchical.cpp) shares: the prefix sums
// of one profile under one objective, one level of the suffix recursion and
// the bisection on the bottleneck. The public search is partition.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "model/error.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"
#include "sim/search/partition.hpp"

namespace trainsim::partition_detail {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max() / 4;

// Prefix sums of one profile under one objective: every stage and boundary
// cost and every stage's memory in O(1). Ranges are half-open [i, j) over
// 0-based layers.
class Costs {
 public:
  Costs(const Profile& profile, const Cluster& cluster, PartitionObjective objective, double memory_limit_bytes,
        const LinkSpec& link)
      : objective_(objective), link_(link), limit_bytes_(memory_limit_bytes) {
    n_ = static_cast<int64_t>(profile.layers.size());
    compute_.assign(n_ + 1, 0.0);
    forward_.assign(n_ + 1, 0.0);
    params_.assign(n_ + 1, 0.0);
    activations_.assign(n_ + 1, 0.0);
    std::vector<double> workspace;
    for (int64_t l = 0; l < n_; ++l) {
      const LayerProfile& layer = profile.layers[l];
      // With the layer's update (measured, or from its bytes): C_k's U_k.
      compute_[l + 1] = compute_[l] + layer.forward_s + layer.backward_s + range_update_s(profile, l, l, cluster);
      forward_[l + 1] = forward_[l] + layer.forward_s;
      params_[l + 1] = params_[l] + layer.param_bytes;
      activations_[l + 1] = activations_[l] + layer.activation_bytes;
      workspace.push_back(layer.workspace_bytes.value_or(0.0));
    }
    build_workspace_table(workspace);
    // cut_s_[c]: the boundary after layer c-1; the bytes a cut carries depend
    // only on where it lies (every layer before it read by a layer after it).
    std::vector<LayerRange> ranges;
    for (int64_t l = 0; l < n_; ++l) ranges.push_back({l, l});
    const std::vector<double> bytes = boundary_bytes(profile, ranges);
    cut_s_.assign(n_ + 1, 0.0);
    cut_bytes_.assign(n_ + 1, 0.0);
    for (int64_t c = 1; c < n_; ++c) {
      cut_bytes_[c] = bytes[c - 1];
      cut_s_[c] = boundary_s(bytes[c - 1]);
    }
  }

  int64_t layers() const { return n_; }
  const LinkSpec& link() const { return link_; }
  double cut_s(int64_t c) const { return cut_s_[c]; }
  double params_bytes(int64_t i, int64_t j) const { return params_[j] - params_[i]; }
  double limit_bytes() const { return limit_bytes_; }
  void set_limit_bytes(double limit_bytes) { limit_bytes_ = limit_bytes; }
  bool limited() const { return std::isfinite(limit_bytes_); }
  // DSP's memory counts the bytes leaving a stage, not monotone in its end.
  bool memory_needs_every_end() const { return limited() && objective_ == PartitionObjective::kDsp; }

  // docs/equations.md §4's ΣT_l with the update (C_k), plus DSP's recompute R_k.
  double compute_s(int64_t i, int64_t j) const {
    double c = compute_[j] - compute_[i];
    if (objective_ == PartitionObjective::kDsp && j < n_) c += forward_[j] - forward_[i];
    return c;
  }

  // docs/equations.md §4: T(i→j, m) = (1/m)·max(C, W^m).
  double stage_s(int64_t i, int64_t j, int64_t replicas) const {
    const double sync = weight_sync_s(replicas, params_bytes(i, j), link_);
    return replicated_stage_s(compute_s(i, j), replicas, sync);
  }

  // One device's memory of stage [i, j) with `replicas`, followed by stages
  // holding `later_workers` devices in `later_stages` stages; the formulas of
  // partition.hpp, i.e. what stage_memory and the schedule's cost model add.
  double memory_bytes(int64_t i, int64_t j, int64_t replicas, int64_t later_workers, int64_t later_stages) const {
    const double w = params_bytes(i, j);
    const double kept = activations_[j] - activations_[i] + cut_bytes_[i];  // a_k + i_k
    const double base = 3.0 * w + workspace_max(i, j);                    // weights, gradients, momentum
    switch (objective_) {
      case PartitionObjective::kOneFOneB: {  // weight_stashing_memory
        const int64_t in_flight = (later_workers + 2 * replicas - 1) / replicas;
        return base + static_cast<double>(in_flight) * kept + static_cast<double>(in_flight - 1) * w;
      }
      case PartitionObjective::kDualPipe: {  // predict_dualpipe, SpecTrain's three extra copies
        const int64_t in_flight = (2 * later_stages + replicas) / replicas;
        return base + static_cast<double>(in_flight) * kept + 3.0 * w;
      }
      case PartitionObjective::kGPipe:  // predict_gpipe: the replica's share of the micro-batches
        return base + kept / static_cast<double>(replicas);
      case PartitionObjective::kDsp:  // predict_dsp: m_k = 2·later, p_k = 1, q_k = 0 but on the last block
        return base + kept +
               (later_stages > 0 ? 2.0 * static_cast<double>(later_stages) * cut_bytes_[i] + 3.0 * cut_bytes_[j] : 0.0);
    }
    return base;
  }

  bool memory_ok(int64_t i, int64_t j, int64_t replicas, int64_t later_workers, int64_t later_stages) const {
    return !limited() || memory_bytes(i, j, replicas, later_workers, later_stages) <= limit_bytes_;
  }

  // Fewest replicas (at most max_replicas) keeping stage [i, j) within x and
  // the memory limit, or kNone. Time: C/r falls with r while W^r/r =
  // 2w/B·(r-1)/r rises, so the replicas within x form an interval; memory
  // never grows with r (fewer batches in flight per replica), so the answer
  // is the smallest r of the interval that fits, found by bisection.
  int64_t replicas_within(int64_t i, int64_t j, double x, int64_t max_replicas, int64_t later_workers,
                          int64_t later_stages) const {
    const int64_t r = fastest_replicas_within(i, j, x, max_replicas);
    if (r == kNone || memory_ok(i, j, r, later_workers, later_stages)) return r;
    if (!memory_ok(i, j, max_replicas, later_workers, later_stages)) return kNone;
    int64_t bad = r, good = max_replicas;
    while (good - bad > 1) {
      const int64_t mid = bad + (good - bad) / 2;
      (memory_ok(i, j, mid, later_workers, later_stages) ? good : bad) = mid;
    }
    return stage_s(i, j, good) <= x ? good : kNone;
  }

 private:
  // The smallest r (at most max_replicas) with stage_s(i, j, r) <= x, or kNone.
  int64_t fastest_replicas_within(int64_t i, int64_t j, double x, int64_t max_replicas) const {
    if (max_replicas < 1 || x <= 0) return kNone;
    const double share = compute_s(i, j) / x;
    if (!(share <= static_cast<double>(max_replicas) + 1)) return kNone;
    auto want = static_cast<int64_t>(share);  // ceil, without a call into libm: share is in [0, max_replicas + 1]
    want += static_cast<double>(want) < share;
    int64_t r = std::max<int64_t>(1, want);
    if (r > 1 && stage_s(i, j, r - 1) <= x) --r;  // ceil may overshoot by rounding
    if (r <= max_replicas && stage_s(i, j, r) <= x) return r;
    if (r + 1 <= max_replicas && stage_s(i, j, r + 1) <= x) return r + 1;
    return kNone;
  }

  double boundary_s(double bytes) const {
    return objective_ == PartitionObjective::kDualPipe ? transfer_s(bytes, link_) : boundary_comm_s(bytes, link_);
  }

  // Sparse table: workspace_[p][l] = max workspace of layers [l, l + 2^p).
  void build_workspace_table(const std::vector<double>& workspace) {
    workspace_.push_back(workspace);
    for (int64_t p = 1; (int64_t{1} << p) <= n_; ++p) {
      const std::vector<double>& below = workspace_.back();
      std::vector<double> row(static_cast<size_t>(n_ - (int64_t{1} << p) + 1));
      for (size_t l = 0; l < row.size(); ++l) row[l] = std::max(below[l], below[l + (size_t{1} << (p - 1))]);
      workspace_.push_back(std::move(row));
    }
  }

  double workspace_max(int64_t i, int64_t j) const {
    int p = 0;
    while ((int64_t{2} << p) <= j - i) ++p;
    return std::max(workspace_[p][i], workspace_[p][j - (int64_t{1} << p)]);
  }

  PartitionObjective objective_;
  LinkSpec link_;
  double limit_bytes_ = 0;
  int64_t n_ = 0;
  std::vector<double> compute_, forward_, params_, activations_, cut_s_, cut_bytes_;
  std::vector<std::vector<double>> workspace_;
};

struct Choice {
  int64_t next = 0;  // the stage starting at i ends before layer `next`
  int64_t replicas = 1;
};

// What one level of the suffix recursion knows of the stages after its first:
// later_stages is exact only when levels count stages exactly (else -1), and
// terminal is the value of the empty suffix (0, or kNone when exactly k >= 1
// more stages must follow).
struct Level {
  int64_t later_stages = -1;
  int64_t terminal = 0;
  int64_t begin = 0;   // the layers [begin, end) to cover; end < 0 = every layer
  int64_t end = -1;
  // The starts worth computing, [first_start, last_start] (last_start < 0:
  // up to the end): cur[i] is kNone outside, where no partition reaches.
  int64_t first_start = 0;
  int64_t last_start = -1;
};

// One level of the suffix recursion over layers [level.begin, level.end):
// cur[i] = fewest workers for layers [i, n) given prev (partition.cpp).
void relax(const Costs& costs, double x, int64_t workers, int64_t max_replicas, const std::vector<int64_t>& prev,
           std::vector<int64_t>& cur, std::vector<Choice>& choice, Level level);

// Each stage's memory, from the workers and stages after it.
void fill_memory(const Costs& costs, std::vector<PartitionStage>& stages);

// The stages the choices of `levels` reach from layer `begin`, top level first.
std::vector<PartitionStage> follow(const Costs& costs, const std::vector<std::vector<Choice>>& levels,
                                   int64_t top_level, int64_t begin = 0, int64_t end = -1);

// The objective's bottleneck of a partition, before GPipe's bubble factor.
double bottleneck_of(const Costs& costs, const std::vector<PartitionStage>& stages);

using Fitter = std::function<std::vector<PartitionStage>(double)>;
using Reached = std::function<double(const std::vector<PartitionStage>&)>;

// Smallest x in [lo, hi] that `fits`, hi known to fit; the partition found
// at the final hi (partition.cpp).
std::vector<PartitionStage> bisect(double lo, double hi, const Fitter& fits, const Reached& reached = {});

// PipeDream's hierarchical search (partition_hierarchical.cpp) over `machines`
// machines of `devices` devices: `inter` charges the inter-machine link,
// `intra` the intra-machine one; the level-2 bottleneck is bisected in
// [lo, hi], hi known to fit. Stages flattened, 1F1B memory filled.
Partition hierarchical_partition(const Costs& inter, const Costs& intra, double lo, double hi, int64_t machines,
                                 int64_t devices, bool replicate);

}  // namespace trainsim::partition_detail
