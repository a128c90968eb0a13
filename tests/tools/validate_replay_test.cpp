// validate's measured profile and cluster (--profile-out, --cluster-out):
// what its predictions read, so `simulate` on them gives a strategy's
// prediction again, away from the machine it was measured on.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;
using testing_fixtures::TempDir;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

TEST(ValidateReplay, SimulatingItsMeasuredProfileAndClusterGivesItsPredictionAgain) {
  TempDir dir;
  const std::string profile = dir.file("profile.json"), cluster = dir.file("cluster.json");
  const auto r = run_cli({"validate",
                          "--model",
                          "fmnist-mlp",
                          "--devices",
                          "cpu:2",
                          "--strategies",
                          "dp-ring",
                          "--iterations",
                          "6",
                          "--rounds",
                          "2",
                          "--max-rounds",
                          "2",
                          "--repeats",
                          "2",
                          "--batch",
                          "16",
                          "--json",
                          dir.file("v.json"),
                          "--profile-out",
                          profile,
                          "--cluster-out",
                          cluster,
                          "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json v = read_json(dir.file("v.json"));
  ASSERT_EQ(v["results"].size(), 1u);
  const nlohmann::json& dp = v["results"][0];
  EXPECT_EQ(read_json(profile)["batch_size"], 16);
  EXPECT_EQ(read_json(cluster)["format"], "trainsim.cluster/1");
  const auto s = run_cli({"simulate", "--profile", profile, "--cluster", cluster, "--strategy", "dp-ring",
                          "--iterations", "6", "--json", "-"});
  ASSERT_EQ(s.status, 0) << s.err;
  const nlohmann::json sim = nlohmann::json::parse(s.out);
  EXPECT_EQ(sim["config"], dp["config"]);
  EXPECT_DOUBLE_EQ(sim["iteration_s"].get<double>(), dp["predicted_simulated_s"].get<double>());
  EXPECT_NEAR(sim["analytic_iteration_s"].get<double>(), dp["predicted_analytic_s"].get<double>(),
              1e-9 * dp["predicted_analytic_s"].get<double>());
}

}  // namespace
}  // namespace trainsim
