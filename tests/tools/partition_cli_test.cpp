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

}  // namespace
}  // namespace trainsim
