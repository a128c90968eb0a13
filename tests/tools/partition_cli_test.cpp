// `trainsim partition`: the best partition of a small profile as a table and
// as JSON, and one-line errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using Result = testing_fixtures::CliResult;

Result run(const std::vector<std::string>& args) { return testing_fixtures::run_cli(args); }

// A profile and a cluster written to a scratch folder for the command to read.
class Inputs {
 public:
  Inputs() : dir_(std::filesystem::temp_directory_path() / ("trainsim_partition_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    // 4 layers of F 1 ms, B 2 ms, 1 MB weights, 4 MB activations.
    write_profile_file(profile(), testing_fixtures::chain_profile(4, 1e-3, 2e-3, 1e6, 4e6));
    std::ofstream(cluster()) << cluster_to_json(testing_fixtures::simple_cluster(1, 2)).dump();
  }
  ~Inputs() { std::filesystem::remove_all(dir_); }
  std::string profile() const { return (dir_ / "profile.json").string(); }
  std::string cluster() const { return (dir_ / "cluster.json").string(); }

 private:
  std::filesystem::path dir_;
};

TEST(PartitionCli, PrintsTheTwoBalancedStagesAsJson) {
  // Without replication on 2 devices: stages 0-1 and 2-3, each
  // 2 ms + 4 ms + update 5 × 2 MB / 100 GB/s = 6.1 ms; the boundary carries
  // 2·(4 MB / 10 GB/s + 10 us) = 0.82 ms (§4's 1F1B objective).
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["stages"].size(), 2u);
  EXPECT_EQ(doc["stages"][0]["layers"], nlohmann::json({0, 1}));
  EXPECT_EQ(doc["stages"][1]["layers"], nlohmann::json({2, 3}));
  EXPECT_EQ(doc["stages"][1]["replicas"], 1);
  EXPECT_NEAR(doc["bottleneck_s"].get<double>(), 6.1e-3, 1e-12);
  // iteration_s is the simulator's time of exactly these stages (no faster
  // than the steady-state bound), as `trainsim simulate` reports it.
  const Result sim = run({"simulate", "--profile", in.profile(), "--cluster", in.cluster(), "--strategy", "pipedream",
                          "--set", "stages=[[0,1],[2,3]]", "--set", "replicas=[1,1]", "--json", "-"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_DOUBLE_EQ(doc["iteration_s"].get<double>(), nlohmann::json::parse(sim.out)["iteration_s"].get<double>());
  EXPECT_GE(doc["iteration_s"].get<double>(), 6.1e-3 * (1 - 1e-12));
}

TEST(PartitionCli, PrintsAStagesTable) {
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule", "gpipe",
                        "--stages", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("replicas"), std::string::npos);
  EXPECT_NE(r.out.find("2-3"), std::string::npos);
}

TEST(PartitionCli, RejectsAnUnknownScheduleNamingTheFlag) {
  const Inputs in;
  const Result r =
      run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule", "zigzag"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--schedule"), std::string::npos);
}

TEST(PartitionCli, RejectsMoreStagesThanDevicesNamingTheFlag) {
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--stages", "3"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--stages"), std::string::npos);
}

// 4 layers of F 1 ms, B 2 ms, 1 MB weights; activations 16, 16, 1, 1 MB.
std::string write_front_heavy_profile(const Inputs& in) {
  Profile p = testing_fixtures::chain_profile(4, 1e-3, 2e-3, 1e6, 1e6);
  p.layers[0].activation_bytes = 16e6;
  p.layers[1].activation_bytes = 16e6;
  const std::string path = in.profile() + ".front_heavy.json";
  write_profile_file(path, p);
  return path;
}

TEST(PartitionCli, MemoryLimitMovesTheCutAndReportsEachStagesMemory) {
  // Two stages under 1F1B with weight stashing: [0-1],[2-3] needs
  // 3·2 + 2·32 + 2 = 72 MB on stage 0; [0],[1-3] needs 3 + 2·16 + 1 = 36 MB
  // and 3·3 + (16 + 1 + 1) + 16 (its input) = 43 MB, within 50 MB.
  const Inputs in;
  const std::string profile = write_front_heavy_profile(in);
  const Result r = run({"partition", "--profile", profile, "--cluster", in.cluster(), "--schedule", "pipedream",
                        "--stages", "2", "--memory-limit", "50MB", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["stages"].size(), 2u);
  EXPECT_EQ(doc["stages"][0]["layers"], nlohmann::json({0, 0}));
  EXPECT_NEAR(doc["stages"][0]["memory_bytes"].get<double>(), 36e6, 1e-3);
  EXPECT_NEAR(doc["stages"][1]["memory_bytes"].get<double>(), 43e6, 1e-3);
  const Result free = run({"partition", "--profile", profile, "--cluster", in.cluster(), "--schedule", "pipedream",
                           "--stages", "2", "--memory-limit", "none", "--json", "-"});
  ASSERT_EQ(free.status, 0) << free.err;
  EXPECT_EQ(nlohmann::json::parse(free.out)["stages"][0]["layers"], nlohmann::json({0, 1}));
}

TEST(PartitionCli, RejectsALimitNothingFitsNamingTheFlag) {
  // The smallest two-stage peak is 43 MB (above): 2MB fits nothing.
  const Inputs in;
  const Result r = run({"partition", "--profile", write_front_heavy_profile(in), "--cluster", in.cluster(),
                        "--schedule", "pipedream", "--stages", "2", "--memory-limit", "2MB"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--memory-limit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("41.0 MiB"), std::string::npos) << r.err;
}

TEST(PartitionCli, RejectsAMalformedLimitNamingTheFlag) {
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--memory-limit", "lots"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--memory-limit"), std::string::npos) << r.err;
}

TEST(PartitionCli, ReportsMachineGroupsOfTheHierarchicalSearch) {
  // 4 weightless layers of F 1 ms, B 2 ms, 40 MB activations on 2 machines ×
  // 2 devices: one group on both machines, its one stage on both devices of
  // each (replicas 4), 12 ms / 4 = 3 ms; --flat reports no groups.
  const Inputs in;
  const std::string profile = in.profile() + ".weightless.json";
  write_profile_file(profile, testing_fixtures::chain_profile(4, 1e-3, 2e-3, 0, 4e7));
  const std::string cluster = in.cluster() + ".two_machines.json";
  std::ofstream(cluster) << cluster_to_json(testing_fixtures::simple_cluster(2, 2)).dump();
  const Result r =
      run({"partition", "--profile", profile, "--cluster", cluster, "--schedule", "pipedream", "--replicate", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["hierarchical"], true);
  ASSERT_EQ(doc["stages"].size(), 1u);
  EXPECT_EQ(doc["stages"][0]["group"], 0);
  EXPECT_EQ(doc["stages"][0]["machines"], 2);
  EXPECT_EQ(doc["stages"][0]["replicas"], 4);
  EXPECT_NEAR(doc["bottleneck_s"].get<double>(), 3e-3, 1e-12);
  const Result flat = run({"partition", "--profile", profile, "--cluster", cluster, "--schedule", "pipedream",
                           "--replicate", "--flat", "--json", "-"});
  ASSERT_EQ(flat.status, 0) << flat.err;
  const nlohmann::json flat_doc = nlohmann::json::parse(flat.out);
  EXPECT_EQ(flat_doc["hierarchical"], false);
  EXPECT_FALSE(flat_doc["stages"][0].contains("group"));
}

TEST(PartitionCli, EvaluatesGivenStagesWithTheirBestReplicas) {
  // The 4-layer chain on 2 devices, stages 0-2 and 3: C = 9 ms + 5 × 3 MB /
  // 100 GB/s = 9.15 ms and 3.05 ms, one device each (2 workers): 9.15 ms.
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--evaluate", "0-2,3-3", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["stages"].size(), 2u);
  EXPECT_NEAR(doc["bottleneck_s"].get<double>(), 9.15e-3, 1e-12);
  const Result bad = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                          "pipedream", "--evaluate", "0-1,3-3"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--evaluate"), std::string::npos) << bad.err;
}

TEST(PartitionCli, EvaluateWithStagesIsRejectedRatherThanOneDropped) {
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--evaluate", "0-2,3-3", "--stages", "3"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("trainsim: error: --stages: given with --evaluate", 0), 0u) << r.err;
}

TEST(PartitionCli, AnEmptyLimitOrEvaluateIsAnErrorNotTheDefault) {
  const Inputs in;
  for (const char* flag : {"--memory-limit", "--evaluate"}) {
    const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                          "pipedream", flag, ""});
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_EQ(r.err, "trainsim: error: " + std::string(flag) +
                         ": is given an empty value (a value, or the option left out)\n");
  }
}

TEST(PartitionCli, ZeroStagesShowsAReadableBound) {
  const Inputs in;
  const Result r = run({"partition", "--profile", in.profile(), "--cluster", in.cluster(), "--schedule",
                        "pipedream", "--stages", "0"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--stages: Value 0 is not > 0"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 120u) << r.err;
}

}  // namespace
}  // namespace trainsim
