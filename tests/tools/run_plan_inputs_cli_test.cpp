// `trainsim run --profile FILE --cluster FILE`: the run executes the plan
// `predict` prices from the same profile and cluster (here a profile whose
// fc2 and fc3 are slow moves gpipe's cut); a profile of another model, a
// cluster of other device counts, or a --batch the profile was not taken
// at are refused with one line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

class RunPlanInputsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("trainsim-run-inputs-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const auto profile = run_cli({"profile", "--analytic", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3"});
    ASSERT_EQ(profile.status, 0) << profile.err;
    nlohmann::json p = nlohmann::json::parse(profile.out);
    for (int layer : {3, 5}) {  // fc2, fc3: 3000 times slower
      for (const char* time : {"forward_s", "backward_s"}) p["layers"][layer][time] = p["layers"][layer][time].get<double>() * 3000;
    }
    std::ofstream(path("skewed.json")) << p.dump();
    const auto cluster = run_cli({"cluster", "show", "p40x4-pcie3", "--json"});
    ASSERT_EQ(cluster.status, 0) << cluster.err;
    nlohmann::json c = nlohmann::json::parse(cluster.out);
    c["name"] = "p40x2";
    c["devices_per_machine"] = 2;
    std::ofstream(path("two.json")) << c.dump();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

nlohmann::json config_of(const std::string& out) { return nlohmann::json::parse(out)["config"]; }

TEST_F(RunPlanInputsCli, RunsThePlanPredictPricesFromTheSameProfileAndCluster) {
  const std::vector<std::string> run = {"run", "--model", "fmnist-mlp", "--strategy", "gpipe", "--devices", "cpu:2",
                                        "--iterations", "2", "--json", "-", "--quiet"};
  const auto plain = run_cli(run);
  ASSERT_EQ(plain.status, 0) << plain.err;
  std::vector<std::string> measured = run;
  measured.insert(measured.end(), {"--profile", path("skewed.json"), "--cluster", path("two.json")});
  const auto planned = run_cli(measured);
  ASSERT_EQ(planned.status, 0) << planned.err;
  const auto predicted = run_cli({"predict", "--profile", path("skewed.json"), "--cluster", path("two.json"),
                                  "--strategies", "gpipe", "--json", "-"});
  ASSERT_EQ(predicted.status, 0) << predicted.err;
  const nlohmann::json priced = nlohmann::json::parse(predicted.out)["results"][0]["config"];
  EXPECT_EQ(config_of(planned.out)["stages"], priced["stages"]);
  EXPECT_EQ(priced["stages"], nlohmann::json::parse("[[0, 3], [4, 6]]"));
  EXPECT_NE(config_of(plain.out)["stages"], priced["stages"]);  // the analytic profile cuts elsewhere
}

TEST_F(RunPlanInputsCli, RefusesInputsOfAnotherModelOrOtherDevices) {
  const std::vector<std::string> run = {"run", "--strategy", "dp-ring", "--devices", "cpu:2", "--iterations", "1",
                                        "--quiet"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const auto other_model = with({"--model", "fmnist-cnn", "--profile", path("skewed.json")});
  EXPECT_EQ(other_model.status, 2);
  EXPECT_NE(other_model.err.find("a profile of fmnist-cnn"), std::string::npos) << other_model.err;
  const auto four = with({"--model", "fmnist-mlp", "--cluster", "p40x4-pcie3"});
  EXPECT_EQ(four.status, 2);
  EXPECT_NE(four.err.find("has 4 devices"), std::string::npos) << four.err;
  const auto batch = with({"--model", "fmnist-mlp", "--profile", path("skewed.json"), "--batch", "32"});
  EXPECT_EQ(batch.status, 2);
  EXPECT_NE(batch.err.find("--batch"), std::string::npos) << batch.err;
}

}  // namespace
}  // namespace trainsim
