// `trainsim report`, run in-process: bad input is a one-line error with exit
// 2 before anything is written; a failing page script is exit 1 with its last
// line of stderr; the JSON files are written before the script runs on the
// folder. The page script here is a stand-in under $TRAINSIM_ANALYSIS_DIR
// (tests/report checks the real page in a browser).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
using testing_fixtures::run_cli;

// A fresh folder for one test, removed after it.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / ("trainsim_report_" + std::to_string(::getpid()) + "_" + std::string(test->name()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// An analysis/ folder whose report.py is `script` (Python).
fs::path fake_analysis_dir(const TempDir& tmp, const std::string& script) {
  const fs::path dir = tmp / "analysis";
  fs::create_directories(dir);
  std::ofstream(dir / "__init__.py") << "";
  std::ofstream(dir / "report.py") << script;
  return dir;
}

// A stand-in page script: it writes into index.html the names of the files
// in the folder it was given (before index.html), after its working folder
// on a line of its own where `with_cwd`.
std::string listing_script(bool with_cwd) {
  return std::string(
             "import os, sys\n"
             "files = sorted(os.listdir(sys.argv[1]))\n"
             "with open(os.path.join(sys.argv[1], 'index.html'), 'w') as f:\n") +
         (with_cwd ? "    f.write(os.getcwd() + '\\n' + ' '.join(files))\n" : "    f.write(' '.join(files))\n");
}

bool have_python3() {
  return ::access("/usr/bin/python3", X_OK) == 0 || std::system("command -v python3 >/dev/null") == 0;
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(std::ifstream(path)); }

TEST(ReportCli, UnknownModelIsAnInputErrorAndWritesNothing) {
  TempDir tmp;
  const auto r =
      run_cli({"report", "--model", "no-such-model", "--cluster", "p40x4-pcie3", "--out", (tmp / "out").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.starts_with("trainsim: error: --model: ")) << r.err;
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

TEST(ReportCli, UnknownClusterOrStrategyIsAnInputErrorNamingItsFlag) {
  TempDir tmp;
  auto r = run_cli({"report", "--model", "fmnist-mlp", "--cluster", "no-such-cluster", "--out", (tmp / "o").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.starts_with("trainsim: error: --cluster: ")) << r.err;
  r = run_cli({"report", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--strategies", "dp-ring,warp", "--out",
               (tmp / "o").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.starts_with("trainsim: error: --strategies: ")) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "o"));
}

TEST(ReportCli, OutThatIsAFileIsAnInputError) {
  TempDir tmp;
  std::ofstream(tmp / "file") << "x";
  const auto r =
      run_cli({"report", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--out", (tmp / "file").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.starts_with("trainsim: error: --out: ")) << r.err;
}

TEST(ReportCli, AnalysisDirWithoutReportScriptIsAnInputErrorNamingTheVariable) {
  TempDir tmp;
  fs::create_directories(tmp / "analysis");  // no report.py
  const ScopedEnv env("TRAINSIM_ANALYSIS_DIR", (tmp / "analysis").string());
  const auto r =
      run_cli({"report", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--out", (tmp / "out").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.starts_with("trainsim: error: TRAINSIM_ANALYSIS_DIR: ")) << r.err;
}

TEST(ReportCli, FailingPageScriptIsExitOneWithItsLastStderrLine) {
  if (!have_python3()) GTEST_SKIP() << "no python3";
  TempDir tmp;
  const ScopedEnv env("TRAINSIM_ANALYSIS_DIR",
                      fake_analysis_dir(tmp,
                                        "import sys\n"
                                        "print('Traceback, first line', file=sys.stderr)\n"
                                        "print('error: choice.json: ranked: is missing (a list)', file=sys.stderr)\n"
                                        "sys.exit(2)\n")
                          .string());
  const auto r = run_cli(
      {"report", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--out", (tmp / "out").string(), "--quiet"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.err.starts_with("trainsim: failed: ")) << r.err;
  EXPECT_NE(r.err.find("error: choice.json: ranked: is missing (a list)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("first line"), std::string::npos) << r.err;
}

TEST(ReportCli, WritesPredictionChoiceAndTopTracesThenRunsTheScriptOnTheFolder) {
  if (!have_python3()) GTEST_SKIP() << "no python3";
  TempDir tmp;
  // The stand-in page lists the folder it was given and its working folder.
  const ScopedEnv env("TRAINSIM_ANALYSIS_DIR", fake_analysis_dir(tmp, listing_script(true)).string());
  const fs::path out = tmp / "out" / "nested";
  const auto r = run_cli({"report", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--batch", "32",
                          "--strategies", "single,dp-ring,gpipe,pipedream", "--out", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;

  const nlohmann::json prediction = read_json(out / "prediction.json");
  EXPECT_EQ(prediction["format"], "trainsim.prediction/1");
  EXPECT_EQ(prediction["batch_size"], 32);
  EXPECT_EQ(prediction["results"].size(), 8u);  // 4 strategies x (analytic, simulated)
  const nlohmann::json choice = read_json(out / "choice.json");
  EXPECT_EQ(choice["format"], "trainsim.choice/1");
  ASSERT_EQ(choice["ranked"].size(), 4u);
  // fmnist-mlp fits a P40 whatever the strategy, so the best three are traced.
  std::vector<std::string> traced;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(choice["ranked"][i]["feasible"].get<bool>());
    traced.push_back("trace-" + choice["ranked"][i]["strategy"].get<std::string>() + ".json");
    EXPECT_FALSE(read_json(out / traced.back())["traceEvents"].empty()) << traced.back();
  }
  EXPECT_FALSE(fs::exists(out / ("trace-" + choice["ranked"][3]["strategy"].get<std::string>() + ".json")));

  // The script ran in the analysis folder's parent, after the JSON were written.
  std::ifstream page(out / "index.html");
  std::string cwd, files;
  std::getline(page, cwd);
  std::getline(page, files);
  EXPECT_EQ(fs::canonical(cwd), fs::canonical(tmp / "."));
  std::sort(traced.begin(), traced.end());
  EXPECT_EQ(files, "choice.json prediction.json " + traced[0] + " " + traced[1] + " " + traced[2]);
  EXPECT_NE(r.out.find("wrote " + (out / "index.html").string()), std::string::npos) << r.out;
}

// A transformer: each way of spreading it simulated (prediction.json), the
// 3-D search (choice.json) and its winner's whole job traced.
TEST(ReportCli, ATransformerWritesItsFamiliesItsSearchAndItsWinnersJob) {
  if (!have_python3()) GTEST_SKIP() << "no python3";
  TempDir tmp;
  const ScopedEnv env("TRAINSIM_ANALYSIS_DIR", fake_analysis_dir(tmp, listing_script(false)).string());
  const fs::path out = tmp / "out";
  const auto r = run_cli({"report", "--model", "megatron-1.7b", "--cluster", "dgx-a100", "--gpus", "32",
                          "--global-batch", "512", "--out", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json prediction = read_json(out / "prediction.json");
  EXPECT_EQ(prediction["format"], "trainsim.llm-prediction/1");
  EXPECT_EQ(prediction["method"], "both");
  ASSERT_EQ(prediction["families"].size(), 8u);
  for (const nlohmann::json& f : prediction["families"]) EXPECT_TRUE(f.contains("simulated")) << f["family"];
  const nlohmann::json choice = read_json(out / "choice.json");
  EXPECT_EQ(choice["format"], "trainsim.llm-choice/1");
  EXPECT_EQ(choice["simulated"], 3);
  ASSERT_FALSE(choice["ranked"].empty());
  EXPECT_EQ(choice["why"].get<std::string>().rfind("why rank 1: it fits", 0), 0u) << choice["why"];
  const std::string traced = "trace-" + choice["ranked"][0]["family"].get<std::string>() + ".json";
  EXPECT_EQ(choice["trace"]["file"], traced);
  EXPECT_TRUE(choice["trace"]["whole_job"].get<bool>());
  std::set<int64_t> workers;
  const nlohmann::json trace = read_json(out / traced);
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") workers.insert(e["pid"].get<int64_t>());
  }
  EXPECT_EQ(workers.size(), 32u);  // every GPU of the job
  std::ifstream page(out / "index.html");
  std::string files;
  std::getline(page, files);
  EXPECT_EQ(files, "choice.json prediction.json " + traced);
  EXPECT_NE(r.out.find("why rank 1"), std::string::npos) << r.out;
  const auto batch = run_cli({"report", "--model", "megatron-1.7b", "--cluster", "dgx-a100", "--gpus", "32",
                              "--global-batch", "512", "--batch", "4", "--out", (tmp / "x").string()});
  EXPECT_EQ(batch.status, 2);
  EXPECT_NE(batch.err.find("--batch: with a transformer --model"), std::string::npos) << batch.err;
  const auto missing = run_cli({"report", "--model", "megatron-1.7b", "--cluster", "dgx-a100", "--global-batch", "512",
                                "--out", (tmp / "y").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--gpus: is missing"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(tmp / "y"));  // refused before anything is written
}

// A profile imported from a PyTorch trace, on the machine the trace ran on:
// the same report a zoo model gets.
TEST(ReportCli, AProfileAndAClusterFileMakeAReport) {
  if (!have_python3()) GTEST_SKIP() << "no python3";
  TempDir tmp;
  const ScopedEnv env("TRAINSIM_ANALYSIS_DIR", fake_analysis_dir(tmp, listing_script(false)).string());
  const std::string trace =
      (fs::path(TRAINSIM_TEST_DATA_DIR) / "kineto" / "kineto_tbplugin_resnet50_V100x1_legacy.json.gz").string();
  const fs::path profile = tmp / "rn50.json", cluster = tmp / "v100.json";
  ASSERT_EQ(run_cli({"profile", "--import-kineto", trace, "--name", "rn50", "--out", profile.string(), "--cluster-out",
                     cluster.string()})
                .status,
            0);
  const auto r = run_cli({"report", "--profile", profile.string(), "--cluster", cluster.string(), "--strategies",
                          "single,dp-ring", "--out", (tmp / "out").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_json(tmp / "out" / "prediction.json")["model"], "rn50");
  EXPECT_EQ(read_json(tmp / "out" / "choice.json")["batch_size"], 32);
  const auto both = run_cli({"report", "--profile", profile.string(), "--model", "vgg16", "--cluster", cluster.string(),
                             "--out", (tmp / "x").string()});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("--profile: given with --model"), std::string::npos) << both.err;
  EXPECT_FALSE(fs::exists(tmp / "x"));
}

}  // namespace
}  // namespace trainsim
