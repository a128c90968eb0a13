// PipeDream's hierarchical partition search on clusters of several machines:
// against a brute force over both levels on 2 machines × 2 devices, and
// against the flat search's answer costed hierarchically.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>

#include "sim/cost/common.hpp"
#include "sim/cost/stages.hpp"
#include "sim/search/partition.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim {
namespace {

using testing_fixtures::layer;
using testing_fixtures::simple_cluster;

constexpr double kInf = std::numeric_limits<double>::infinity();

Profile random_profile(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time_s(1e-3, 2e-2), bytes(0.0, 4e7), coin(0.0, 1.0);
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  for (int l = 0; l < n; ++l) {
    std::vector<std::string> inputs{l == 0 ? "input" : "l" + std::to_string(l - 1)};
    if (l >= 2 && coin(rng) < 0.3) inputs.push_back("l" + std::to_string(l - 2));
    p.layers.push_back(layer("l" + std::to_string(l), inputs, time_s(rng), time_s(rng), bytes(rng), bytes(rng)));
  }
  return p;
}

// docs/equations.md §4 written out: a stage's C (Σ F + B plus the update) and T.
struct Model {
  const Profile& profile;
  const Cluster& cluster;
  std::vector<double> cut_bytes;  // cut_bytes[c]: the boundary before layer c

  Model(const Profile& p, const Cluster& c) : profile(p), cluster(c) {
    std::vector<LayerRange> singles;
    for (int64_t l = 0; l < static_cast<int64_t>(p.layers.size()); ++l) singles.push_back({l, l});
    const std::vector<double> bytes = boundary_bytes(p, singles);
    cut_bytes.assign(p.layers.size() + 1, 0.0);
    for (size_t cut = 1; cut < p.layers.size(); ++cut) cut_bytes[cut] = bytes[cut - 1];
  }
  double weights(int64_t i, int64_t j) const { return range_totals(profile, i, j - 1).param_bytes; }
  double stage_s(int64_t i, int64_t j, int64_t r, const LinkSpec& link) const {
    const ModelTotals t = range_totals(profile, i, j - 1);
    const double c = t.forward_s + t.backward_s + update_s(t.param_bytes, cluster);
    return std::max(c, 2.0 * static_cast<double>(r - 1) * t.param_bytes / link.bandwidth_bytes_per_s) /
           static_cast<double>(r);
  }
  double cut_s(int64_t c, const LinkSpec& link) const { return boundary_comm_s(cut_bytes[c], link); }
};

// Every split of [i, j) into contiguous pieces: calls visit with the ends.
void each_split(int64_t i, int64_t j, const std::function<void(const std::vector<int64_t>&)>& visit) {
  for (int64_t mask = 0; mask < (int64_t{1} << (j - i - 1)); ++mask) {
    std::vector<int64_t> ends;
    for (int64_t gap = 0; gap < j - i - 1; ++gap) {
      if (mask & (int64_t{1} << gap)) ends.push_back(i + gap + 1);
    }
    ends.push_back(j);
    visit(ends);
  }
}

// Best of every assignment of counts >= 1 (Σ <= budget) to `parts` pieces.
double best_assignment(size_t parts, int64_t budget, const std::function<double(const std::vector<int64_t>&)>& cost) {
  double best = kInf;
  std::vector<int64_t> counts;
  std::function<void(int64_t)> go = [&](int64_t left) {
    if (counts.size() == parts) {
      best = std::min(best, cost(counts));
      return;
    }
    for (int64_t c = 1; c <= left - static_cast<int64_t>(parts - counts.size() - 1); ++c) {
      counts.push_back(c);
      go(left - c);
      counts.pop_back();
    }
  };
  go(budget);
  return best;
}

// A¹(i→j): layers [i, j) over the devices of one machine, intra link.
double machine_optimum_s(const Model& model, int64_t i, int64_t j) {
  double best = kInf;
  each_split(i, j, [&](const std::vector<int64_t>& ends) {
    best = std::min(best, best_assignment(ends.size(), model.cluster.devices_per_machine,
                                          [&](const std::vector<int64_t>& r) {
                                            double worst = 0;
                                            int64_t first = i;
                                            for (size_t k = 0; k < ends.size(); ++k) {
                                              worst = std::max(worst, model.stage_s(first, ends[k], r[k],
                                                                                    model.cluster.intra_link));
                                              if (k > 0) worst = std::max(worst, model.cut_s(first, model.cluster.intra_link));
                                              first = ends[k];
                                            }
                                            return worst;
                                          }));
  });
  return best;
}

// Level 2: groups of whole machines, (1/m)·max(A¹, W^m inter), inter boundaries.
double hierarchical_optimum_s(const Model& model) {
  const int64_t n = static_cast<int64_t>(model.profile.layers.size());
  const LinkSpec& inter = model.cluster.inter_link;
  double best = kInf;
  each_split(0, n, [&](const std::vector<int64_t>& ends) {
    best = std::min(best, best_assignment(ends.size(), model.cluster.machines, [&](const std::vector<int64_t>& m) {
      double worst = 0;
      int64_t first = 0;
      for (size_t k = 0; k < ends.size(); ++k) {
        const double sync_s = weight_sync_s(m[k], model.weights(first, ends[k]), inter);
        worst = std::max(worst, std::max(machine_optimum_s(model, first, ends[k]), sync_s) /
                                    static_cast<double>(m[k]));
        if (k > 0) worst = std::max(worst, model.cut_s(first, inter));
        first = ends[k];
      }
      return worst;
    }));
  });
  return best;
}

// The hierarchical cost of a partition whose stages carry their groups:
// inner replicas are replicas / machines.
double hierarchical_cost_s(const Model& model, const Partition& p) {
  double worst = 0;
  for (size_t k = 0; k < p.stages.size(); ++k) {
    const PartitionStage& s = p.stages[k];
    const int64_t m = std::max<int64_t>(1, s.machines);
    worst = std::max(worst, model.stage_s(s.layers.first, s.layers.last + 1, s.replicas / m,
                                          model.cluster.intra_link) / static_cast<double>(m));
    if (k > 0) {
      // An intra-machine boundary is part of A¹, shared by the group's m machines.
      const bool same_group = p.stages[k - 1].group == s.group;
      worst = std::max(worst, same_group ? model.cut_s(s.layers.first, model.cluster.intra_link) / static_cast<double>(m)
                                         : model.cut_s(s.layers.first, model.cluster.inter_link));
    }
  }
  // Each group's weight synchronisation over its machines.
  for (size_t k = 0; k < p.stages.size();) {
    size_t end = k;
    while (end < p.stages.size() && p.stages[end].group == p.stages[k].group) ++end;
    const int64_t m = std::max<int64_t>(1, p.stages[k].machines);
    const double w = model.weights(p.stages[k].layers.first, p.stages[end - 1].layers.last + 1);
    worst = std::max(worst, weight_sync_s(m, w, model.cluster.inter_link) / static_cast<double>(m));
    k = end;
  }
  return worst;
}

TEST(PartitionHierarchical, EqualsBruteForceOverBothLevels) {
  std::mt19937 rng(4242);
  const Cluster cluster = simple_cluster(2, 2);
  for (int trial = 0; trial < 30; ++trial) {
    const Profile profile = random_profile(rng, 1 + trial % 7);
    const Model model(profile, cluster);
    PartitionOptions options;
    options.memory_limit_bytes = -1;
    const Partition found = search_partition(profile, cluster, options);
    ASSERT_TRUE(found.hierarchical);
    const double expected = hierarchical_optimum_s(model);
    ASSERT_NEAR(found.bottleneck_s, expected, 1e-9 * expected) << "trial " << trial;
    EXPECT_NEAR(hierarchical_cost_s(model, found), found.bottleneck_s, 1e-9 * expected) << "trial " << trial;
    // Groups are contiguous runs of stages; their machines sum to at most 2.
    int64_t machines = 0;
    for (size_t k = 0; k < found.stages.size(); ++k) {
      if (k == 0 || found.stages[k].group != found.stages[k - 1].group) {
        EXPECT_EQ(found.stages[k].group, k == 0 ? 0 : found.stages[k - 1].group + 1);
        machines += found.stages[k].machines;
      }
      EXPECT_EQ(found.stages[k].replicas % found.stages[k].machines, 0);
    }
    EXPECT_LE(machines, 2);
  }
}

// The flat answer as a hierarchical partition when no stage spans machines
// (devices filled in order): each machine one group of m = 1; else nullopt.
std::optional<Partition> as_machine_groups(const Partition& flat, const Cluster& cluster) {
  Partition p = flat;
  int64_t device = 0;
  for (PartitionStage& s : p.stages) {
    const int64_t first = machine_of(device, cluster), last = machine_of(device + s.replicas - 1, cluster);
    if (first != last) return std::nullopt;
    s.group = first;
    s.machines = 1;
    device += s.replicas;
  }
  return p;
}

TEST(PartitionHierarchical, NeverWorseThanTheFlatAnswerUnderTheHierarchicalCostOnASlowInterLink) {
  std::mt19937 rng(99);
  Cluster cluster = simple_cluster(2, 2);
  cluster.inter_link = {1e8, 1e-4};  // 100 MB/s between machines, 100× slower than inside
  int compared = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const Profile profile = random_profile(rng, 2 + trial % 6);
    const Model model(profile, cluster);
    PartitionOptions options;
    options.memory_limit_bytes = -1;
    const Partition hierarchical = search_partition(profile, cluster, options);
    options.hierarchical = false;
    const Partition flat = search_partition(profile, cluster, options);
    EXPECT_FALSE(flat.hierarchical);
    const std::optional<Partition> grouped = as_machine_groups(flat, cluster);
    if (!grouped) continue;
    ++compared;
    EXPECT_LE(hierarchical.bottleneck_s, hierarchical_cost_s(model, *grouped) * (1 + 1e-9)) << "trial " << trial;
  }
  EXPECT_GT(compared, 10);
}

TEST(PartitionHierarchical, ReplicatesAWeightlessModelOverBothMachinesRatherThanCutting) {
  // 4 layers of F 1 ms, B 2 ms, no weights, 40 MB activations, 2 machines × 2
  // devices. Any inter-machine cut costs 2·(40 MB / 1 GB/s + 50 us) = 80.1 ms
  // and an intra one 2·(40 MB / 10 GB/s + 10 us) = 8.02 ms, but without
  // weights W^m = 0: one group on both machines, its one stage on both
  // devices of each, A¹ = 12 ms / 2 = 6 ms, T = 6 / 2 = 3 ms (the lower
  // bound ΣC / 4 devices).
  const Profile profile = testing_fixtures::chain_profile(4, 1e-3, 2e-3, 0, 4e7);
  const Partition p = search_partition(profile, simple_cluster(2, 2), {});
  ASSERT_TRUE(p.hierarchical);
  EXPECT_NEAR(p.bottleneck_s, 3e-3, 1e-12);
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].machines, 2);
  EXPECT_EQ(p.stages[0].replicas, 4);
}

}  // namespace
}  // namespace trainsim
