// `simulate` and `predict` under inputs that ask for absurd work or carry the
// simulator's clock out of its range: one error line and exit 2 before the
// work, or a bounded run whose times are finite, positive and no faster than
// the compute allows (docs/simulator.md "Limits").
#include "tests/tools/cli_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"

namespace trainsim {
namespace {

using Result = testing_fixtures::CliResult;

Result run(const std::vector<std::string>& args) { return testing_fixtures::run_cli(args); }

// A file in a per-process temporary folder, removed with the object.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() / ("trainsim_limits_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A chain of `layers` layers, each `forward_s` forward and twice that backward.
std::string chain_profile_text(int layers, double forward_s) {
  nlohmann::json doc = {{"format", "trainsim.profile/1"}, {"model", "chain"}, {"batch_size", 32},
                        {"device", {{"name", "d"}, {"kind", "gpu"}}}};
  std::string previous = "input";
  for (int i = 0; i < layers; ++i) {
    const std::string name = "l" + std::to_string(i);
    doc["layers"].push_back({{"name", name}, {"inputs", {previous}}, {"forward_s", forward_s},
                             {"backward_s", 2 * forward_s}, {"param_bytes", 1e6}, {"activation_bytes", 1e6}});
    previous = name;
  }
  return doc.dump();
}

std::string cluster_with_machines(int64_t machines) {
  nlohmann::json c = cluster_to_json(load_cluster("h100x4node-ib400"));
  c["machines"] = machines;
  c["name"] = "big";
  return c.dump();
}

void expect_one_error_line(const Result& r, const std::string& part) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << "error should say '" << part << "': " << r.err;
}

const std::vector<std::string> kSimulate = {"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST(SimLimits, AStragglerSlowdownBeyondAMillionIsRejectedWithTheBound) {
  for (const char* straggler : {"0.5:1e11", "0.5:1e308"}) {
    expect_one_error_line(run(with(kSimulate, {"dp-ring", "--straggler", straggler})), "SLOWDOWN <= 1e+06");
  }
}

TEST(SimLimits, TheLargestStragglerSlowdownGivesASlowerPositiveIteration) {
  const Result plain = run(with(kSimulate, {"dp-ring", "--json", "-"}));
  const Result slowed = run(with(kSimulate, {"dp-ring", "--straggler", "0.5:1e6", "--json", "-"}));
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(slowed.status, 0) << slowed.err;
  const double plain_s = nlohmann::json::parse(plain.out)["iteration_s"].get<double>();
  const nlohmann::json doc = nlohmann::json::parse(slowed.out);
  for (const char* key : {"iteration_s", "iteration_min_s", "iteration_max_s", "makespan_s"}) {
    ASSERT_TRUE(doc[key].is_number()) << key;
    EXPECT_GE(doc[key].get<double>(), plain_s) << key;
  }
}

TEST(SimLimits, ARunPastTheClocksRangeIsAnErrorNotANegativeTime) {
  // 100,000 s ops slowed a million times: 1e11 s, past 2^63 ns (9.2e9 s).
  const TempFile profile("slow.json", chain_profile_text(2, 1e5));
  const Result r = run({"simulate", "--profile", profile.path(), "--cluster", "p40x4-pcie3", "--strategy", "dp-ring",
                        "--straggler", "1:1e6"});
  expect_one_error_line(r, "past the simulator's clock (2^63 ns, about 292 years)");
  EXPECT_EQ(r.out, "");
}

TEST(SimLimits, PipesgdWiderThanTheIterationsSimulatedIsAnErrorNotA240xSpeedup) {
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategies", "single,pipesgd",
                        "--set", "pipesgd.width=100", "--method", "both"});
  expect_one_error_line(r, "at least 101 iterations");
}

TEST(SimLimits, PipesgdOfWidth100IsNoFasterThanFourDevicesAllow) {
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategies", "single,pipesgd",
                        "--set", "pipesgd.width=100", "--method", "both", "--iterations", "110", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);  // a range-for over a temporary's member would dangle
  for (const nlohmann::json& p : doc.at("results")) {
    EXPECT_LE(p["speedup_vs_single"].get<double>(), 4.0 * (1 + 1e-9)) << p["strategy"] << " " << p["method"];
  }
}

TEST(SimLimits, IterationsPastTheAdvertisedMaximumAreRejected) {
  expect_one_error_line(run(with(kSimulate, {"dp-ring", "--iterations", "1000000"})),
                        "--iterations: is 1000000 (at most 100000 iterations");
  expect_one_error_line(run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--method", "simulated",
                             "--iterations", "1000000000"}),
                        "--iterations: is 1000000000");
}

TEST(SimLimits, APlanOverTheOpLimitFailsBeforeItIsWrittenAndSaysWhatToReduce) {
  const Result r = run({"simulate", "--model", "fmnist-mlp", "--batch", "1000000000", "--cluster", "p40x4-pcie3",
                        "--strategy", "gpipe", "--set", "microbatches=1000000000"});
  expect_one_error_line(r, "gpipe plan: would hold at least 400G ops");
  EXPECT_NE(r.err.find("fewer --iterations, micro-batches or stages"), std::string::npos) << r.err;
}

TEST(SimLimits, ATraceOfMoreThanHalfAMillionOpsIsRejectedBeforeSimulating) {
  // dp-ring on 4 workers: a forward, a backward, an AllReduce and an update each, 16 ops per iteration.
  const Result r = run({"simulate", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--strategy", "dp-ring",
                        "--iterations", "40000", "--trace", "/nonexistent/trace.json"});
  expect_one_error_line(r, "--trace: the plan holds 640000 ops");
}

TEST(SimLimits, ClustersOfABillionDevicesAreRejectedBeforeAnyModelRuns) {
  const TempFile cluster("cluster.json", cluster_with_machines(125'000'000));
  expect_one_error_line(run({"predict", "--model", "resnet50", "--cluster", cluster.path()}),
                        "at most 1000000 devices");
}

TEST(SimLimits, AStageCountPastThePartitionBoundIsRejected) {
  const TempFile profile("layers.json", chain_profile_text(2000, 1e-4));
  const TempFile cluster("cluster.json", cluster_with_machines(128));
  expect_one_error_line(run({"predict", "--profile", profile.path(), "--cluster", cluster.path(), "--strategies",
                             "gpipe", "--set", "stages=600"}),
                        "at most 500 stages");
}

}  // namespace
}  // namespace trainsim
