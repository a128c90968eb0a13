// validate's measured profile and cluster (--profile-out, --cluster-out):
// what its predictions read, so `simulate` on them gives a strategy's
// prediction again, and `validate --replay` prices a recorded validation
// again, away from the machine it was measured on.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

// `text`'s words, then `more`.
std::vector<std::string> words(const std::string& text, const std::vector<std::string>& more = {}) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// A validation of dp-ring and gpipe on two CPU workers, two short rounds,
// with the profile and cluster its predictions read, in `dir`.
void validate_into(const TempDir& dir) {
  const auto r = run_cli(words(
      "validate --model fmnist-mlp --devices cpu:2 --strategies dp-ring,gpipe:microbatches=2 --iterations 6 --rounds 2 "
      "--max-rounds 2 --repeats 2 --batch 16 --quiet",
      {"--json", dir.file("v.json"), "--profile-out", dir.file("profile.json"), "--cluster-out",
       dir.file("cluster.json")}));
  ASSERT_EQ(r.status, 0) << r.err;
}

TEST(ValidateReplay, SimulatingItsMeasuredProfileAndClusterGivesItsPredictionAgain) {
  TempDir dir;
  validate_into(dir);
  const std::string profile = dir.file("profile.json"), cluster = dir.file("cluster.json");
  const nlohmann::json v = read_json(dir.file("v.json"));
  ASSERT_EQ(v["results"].size(), 2u);
  const nlohmann::json& dp = v["results"][0];
  ASSERT_EQ(dp["strategy"], "dp-ring");
  EXPECT_EQ(read_json(profile)["batch_size"], 16);
  EXPECT_EQ(read_json(cluster)["format"], "trainsim.cluster/1");
  const auto s = run_cli(
      words("simulate --strategy dp-ring --iterations 6 --json -", {"--profile", profile, "--cluster", cluster}));
  ASSERT_EQ(s.status, 0) << s.err;
  const nlohmann::json sim = nlohmann::json::parse(s.out);
  EXPECT_EQ(sim["config"], dp["config"]);
  EXPECT_DOUBLE_EQ(sim["iteration_s"].get<double>(), dp["predicted_simulated_s"].get<double>());
  EXPECT_NEAR(sim["analytic_iteration_s"].get<double>(), dp["predicted_analytic_s"].get<double>(),
              1e-9 * dp["predicted_analytic_s"].get<double>());
}

// `validate --replay` of dir's validation, priced from its profile and `cluster`.
std::vector<std::string> replay_of(const TempDir& dir, const std::string& cluster, const std::string& more = "") {
  return words("validate " + more,
               {"--replay", dir.file("v.json"), "--profile", dir.file("profile.json"), "--cluster", cluster});
}

// --replay prices every strategy's plan as it ran (its settings, gpipe's
// stages and micro-batches among them): from the validation's own profile
// and cluster its predictions come back; from a cluster whose links are a
// hundred times slower dp-ring's AllReduce and gpipe's boundaries take
// longer, against the same measurements.
TEST(ValidateReplay, PricesARecordedValidationAgainFromAProfileAndACluster) {
  TempDir dir;
  validate_into(dir);
  const nlohmann::json v = read_json(dir.file("v.json"));
  const auto same = run_cli(replay_of(dir, dir.file("cluster.json"), "--json -"));
  ASSERT_EQ(same.status, 0) << same.err;
  const nlohmann::json replayed = nlohmann::json::parse(same.out);
  EXPECT_EQ(replayed["format"], "trainsim.validation_replay/1");
  ASSERT_EQ(replayed["results"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& r = replayed["results"][i];
    const nlohmann::json& recorded = v["results"][i];
    EXPECT_EQ(r["strategy"], recorded["strategy"]);
    EXPECT_EQ(r["measured_s"], recorded["measured_s"]);
    EXPECT_DOUBLE_EQ(r["predicted_simulated_s"].get<double>(), recorded["predicted_simulated_s"].get<double>());
    EXPECT_DOUBLE_EQ(r["predicted_analytic_s"].get<double>(), recorded["predicted_analytic_s"].get<double>());
    EXPECT_DOUBLE_EQ(r["error_simulated"].get<double>(), recorded["error_simulated"].get<double>());
  }
  EXPECT_DOUBLE_EQ(replayed["median_abs_error_simulated"].get<double>(),
                   replayed["recorded_median_abs_error_simulated"].get<double>());

  nlohmann::json slow = read_json(dir.file("cluster.json"));
  for (const char* link : {"intra_link", "inter_link"}) {
    slow[link]["bandwidth_bytes_per_s"] = slow[link]["bandwidth_bytes_per_s"].get<double>() / 100;
    slow[link]["latency_s"] = slow[link]["latency_s"].get<double>() * 100;
  }
  const auto slower = run_cli(replay_of(dir, dir.write("slow.json", slow.dump()), "--json -"));
  ASSERT_EQ(slower.status, 0) << slower.err;
  for (const nlohmann::json& r : nlohmann::json::parse(slower.out)["results"]) {
    EXPECT_GT(r["predicted_simulated_s"].get<double>(), 1.5 * r["recorded_simulated_s"].get<double>()) << r;
    EXPECT_GT(r["error_simulated"].get<double>(), 0.4) << r;
  }
  const auto table = run_cli(replay_of(dir, dir.file("cluster.json")));
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("median |error|: simulated"), std::string::npos) << table.out;
}

TEST(ValidateReplay, RefusesWhatItCannotPriceInOneLine) {
  TempDir dir;
  validate_into(dir);
  const std::string v = dir.file("v.json"), profile = dir.file("profile.json"), cluster = dir.file("cluster.json");
  const auto refused = [](const std::vector<std::string>& args, const std::string& says) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  refused(words("validate", {"--replay", v, "--profile", profile}), "--cluster: is missing with --replay");
  refused(replay_of(dir, cluster, "--rounds 3"), "--rounds: given with --replay");
  refused(replay_of(dir, cluster, "--progress-lines"), "--progress-lines: given with --replay");  // a hidden option
  refused(words("validate --model fmnist-mlp", {"--cluster", cluster}), "--cluster: given without --replay");
  refused(words("validate", {"--replay", cluster, "--profile", profile, "--cluster", cluster}),
          "format: is 'trainsim.cluster/1'");
  nlohmann::json other = read_json(profile);
  other["batch_size"] = 32;
  refused(words("validate", {"--replay", v, "--profile", dir.write("b32.json", other.dump()), "--cluster", cluster}),
          "--profile: is fmnist-mlp at batch 32");
  nlohmann::json odd = read_json(v);
  odd["format"] = 1;
  refused(words("validate", {"--replay", dir.write("f.json", odd.dump()), "--profile", profile, "--cluster", cluster}),
          "format: is missing");
  odd = read_json(v);
  odd["iterations"] = 4294967297;  // 2^32 + 1
  refused(words("validate", {"--replay", dir.write("i.json", odd.dump()), "--profile", profile, "--cluster", cluster}),
          ".iterations: is 4294967297");
  nlohmann::json unknown = read_json(v);
  unknown["results"][0]["strategy"] = "dp-nothing";
  refused(
      words("validate", {"--replay", dir.write("u.json", unknown.dump()), "--profile", profile, "--cluster", cluster}),
      "results[0].strategy");
}

}  // namespace
}  // namespace trainsim
