// Our partition search against the partitions PipeDream's own optimizer wrote
// (`stage_id` per node in its test graphs, tests/data/pipedream):
// both costed under the same 1F1B objective (docs/equations.md §4) on one machine
// of Tesla P40s on PCIe 3.0 x16, PipeDream's stages with their best replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "model/error.hpp"
#include "profiles/cluster.hpp"
#include "profiles/pipedream_import.hpp"
#include "sim/search/partition.hpp"

namespace trainsim {
namespace {

const std::string kPeerDir = std::string(TRAINSIM_TEST_DATA_DIR) + "/pipedream/";

// node id -> stage_id, from the optimizer's output lines
// `nodeK -- description -- costs -- stage_id=S` (edges start with a TAB).
std::map<std::string, int64_t> read_stage_ids(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, int64_t> stage_of;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '\t') continue;
    const size_t at = line.rfind("stage_id=");
    if (at == std::string::npos) continue;
    stage_of[line.substr(0, line.find(" -- "))] = std::stoll(line.substr(at + 9));
  }
  return stage_of;
}

// PipeDream's stages as ranges of our topological order, or empty when a
// stage is not contiguous in it.
std::vector<LayerRange> pipedream_ranges(const Profile& profile, const std::map<std::string, int64_t>& stage_of) {
  std::vector<LayerRange> ranges;
  int64_t current = -1;
  for (int64_t l = 0; l < static_cast<int64_t>(profile.layers.size()); ++l) {
    const int64_t stage = stage_of.at(profile.layers[l].name);
    if (stage == current) {
      ranges.back().last = l;
      continue;
    }
    if (stage != current + 1) return {};  // a stage resumes, or one is skipped
    ranges.push_back({l, l});
    current = stage;
  }
  return ranges;
}

// One machine of `devices` P40s with p40x4-pcie3's PCIe 3.0 x16 link.
Cluster p40_machine(int64_t devices) {
  Cluster c = load_cluster("p40x4-pcie3");
  c.devices_per_machine = devices;
  return c;
}

std::string describe(const Partition& p) {
  std::string text;
  for (const PartitionStage& s : p.stages) {
    text += (text.empty() ? "" : ", ") + std::to_string(s.layers.first) + "-" + std::to_string(s.layers.last) +
            " x" + std::to_string(s.replicas);
  }
  return text;
}

// The layers stably sorted by stage: still a topological order when every
// edge runs from a stage to the same or a later one (checked).
Profile sorted_by_stage(const Profile& profile, const std::map<std::string, int64_t>& stage_of) {
  Profile sorted = profile;
  std::stable_sort(sorted.layers.begin(), sorted.layers.end(), [&](const LayerProfile& a, const LayerProfile& b) {
    return stage_of.at(a.name) < stage_of.at(b.name);
  });
  std::map<std::string, size_t> position;
  for (size_t l = 0; l < sorted.layers.size(); ++l) position[sorted.layers[l].name] = l;
  for (size_t l = 0; l < sorted.layers.size(); ++l) {
    for (const std::string& input : sorted.layers[l].inputs) {
      EXPECT_TRUE(!position.count(input) || position.at(input) < l) << input << " feeds " << sorted.layers[l].name;
    }
  }
  return sorted;
}

// `contiguous`: whether PipeDream's stages are contiguous in the importer's
// topological order; when not, both sides run on the order sorted by stage.
void compare(const std::string& model, bool contiguous) {
  const std::string path = kPeerDir + model + "/" + model + "_partitioned.txt";
  const std::map<std::string, int64_t> stage_of = read_stage_ids(path);
  Profile profile = import_pipedream_graph(path, std::nullopt);
  std::vector<LayerRange> ranges = pipedream_ranges(profile, stage_of);
  EXPECT_EQ(!ranges.empty(), contiguous) << model;
  if (ranges.empty()) {
    profile = sorted_by_stage(profile, stage_of);
    ranges = pipedream_ranges(profile, stage_of);
  }
  ASSERT_FALSE(ranges.empty()) << model;
  // p40x4-pcie3's PCIe 3.0 x16 link, and the 1 GB/s PipeDream's optimizer assumes by default.
  for (const double bandwidth_bytes_per_s : {0.0, 1e9})
  for (int64_t workers : {4, 8}) {
    Cluster cluster = p40_machine(workers);
    if (bandwidth_bytes_per_s > 0) cluster.intra_link.bandwidth_bytes_per_s = bandwidth_bytes_per_s;
    PartitionOptions options;
    options.memory_limit_bytes = -1;  // PipeDream's optimizer ran without a memory bound
    const Partition theirs = evaluate_partition(profile, cluster, ranges, options, "pipedream stages");
    const Partition ours = search_partition(profile, cluster, options);
    std::cout << model << " W=" << workers << " link " << cluster.intra_link.bandwidth_bytes_per_s << " pipedream [" << describe(theirs) << "] " << theirs.bottleneck_s
              << " s; ours [" << describe(ours) << "] " << ours.bottleneck_s << " s; ratio "
              << theirs.bottleneck_s / ours.bottleneck_s << "\n";
    EXPECT_LE(ours.bottleneck_s, theirs.bottleneck_s * (1 + 1e-9)) << model << " on " << workers << " workers";
  }
}

TEST(PartitionVsPipeDream, OursIsNeverSlowerThanPipeDreamsVgg16Stages) { compare("vgg16", true); }

TEST(PartitionVsPipeDream, OursIsNeverSlowerThanPipeDreamsResNet50Stages) { compare("resnet50", false); }

TEST(PartitionEvaluate, GivesFixedStagesTheirFewestReplicasWithinTheBottleneck) {
  // 4 layers of F 1 ms, B 2 ms, 1 MB weights, 4 MB activations, 4 devices of
  // simple_cluster (10 GB/s). Stages 0-2 and 3: C = 9 ms + 5 × 3 MB / 100 GB/s
  // = 9.15 ms and 3.05 ms. Three replicas for the first: max(9.15, W³ =
  // 2·2·3 MB / 10 GB/s = 1.2 ms) / 3 = 3.05 ms, the second's 3.05 ms alone;
  // the cut 2·(4 MB / 10 GB/s + 10 us) = 0.82 ms. Bottleneck 3.05 ms.
  Cluster cluster = load_cluster("p40x4-pcie3");
  cluster.device.memory_bytes_per_s = 100e9;
  cluster.intra_link = {10e9, 10e-6};
  Profile profile;
  profile.model = "chain";
  profile.batch_size = 32;
  std::string previous = "input";
  for (int l = 0; l < 4; ++l) {
    LayerProfile layer;
    layer.name = "l" + std::to_string(l);
    layer.inputs = {previous};
    layer.forward_s = 1e-3;
    layer.backward_s = 2e-3;
    layer.param_bytes = 1e6;
    layer.activation_bytes = 4e6;
    profile.layers.push_back(layer);
    previous = layer.name;
  }
  PartitionOptions options;
  options.memory_limit_bytes = -1;
  const Partition p = evaluate_partition(profile, cluster, {{0, 2}, {3, 3}}, options, "--evaluate");
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].replicas, 3);
  EXPECT_EQ(p.stages[1].replicas, 1);
  EXPECT_NEAR(p.bottleneck_s, 3.05e-3, 1e-12);
  EXPECT_THROW(evaluate_partition(profile, cluster, {{0, 1}, {3, 3}}, options, "--evaluate"), InputError);
}

}  // namespace
}  // namespace trainsim
