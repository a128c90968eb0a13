// `trainsim profile --import-kineto`: the imported profile and the trace's
// machine make `predict` reproduce the measured step of each single-GPU
// trace for `single`; --summary says host-bound or GPU-bound; one error
// line for each bad combination.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "profiles/kineto/kineto_import.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
using testing_fixtures::run_cli;

std::string real_trace(const std::string& name) {
  return (fs::path(TRAINSIM_TEST_DATA_DIR) / "kineto" / (name + ".json.gz")).string();
}

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("trainsim-kineto-cli-" + std::to_string(getpid()) + "-" + name);
}

// predict's `single` on the imported profile and machine, against the
// trace's own median step.
TEST(KinetoCli, PredictReproducesEachSingleGpuTracesStep) {
  for (const std::string name : {"hta_ns_resolution_V100x1_rank0", "kineto_tbplugin_resnet50_V100x1_legacy"}) {
    const fs::path profile = temp(name + ".json"), cluster = temp(name + "-cluster.json");
    const auto imported = run_cli({"profile", "--import-kineto", real_trace(name), "--batch", "32", "--out",
                                   profile.string(), "--cluster-out", cluster.string()});
    ASSERT_EQ(imported.status, 0) << imported.err;
    const auto predicted = run_cli({"predict", "--profile", profile.string(), "--cluster", cluster.string(),
                                    "--strategies", "single", "--json", "-"});
    fs::remove(profile);
    fs::remove(cluster);
    ASSERT_EQ(predicted.status, 0) << predicted.err;
    const double predicted_s = nlohmann::json::parse(predicted.out)["results"][0]["iteration_s"].get<double>();
    const double measured_s = import_kineto(read_kineto_trace(real_trace(name)), {}).median.step_s;
    EXPECT_NEAR(predicted_s / measured_s, 1.0, 0.05) << name << ": " << predicted_s << " s against " << measured_s;
  }
}

TEST(KinetoCli, TheSummarySaysWhereTheStepWent) {
  const auto ddp =
      run_cli({"profile", "--import-kineto", real_trace("hta_nccl_data_A100x2_resnet50_ddp_rank0"), "--summary"});
  ASSERT_EQ(ddp.status, 0) << ddp.err;
  for (const char* part : {"world size 2 (nccl)", "exposed communication", "all-reduced a step: 97.5 MiB in 5",
                           "host-bound: the GPU idles", "parameters from DDP's 5 all-reduced buckets",
                           "its own strategy predicted", "predicted: dp-overlap, 25 MB buckets, 2 GPUs"}) {
    EXPECT_NE(ddp.out.find(part), std::string::npos) << part << "\n" << ddp.out;
  }
  const auto ns = run_cli({"profile", "--import-kineto", real_trace("hta_ns_resolution_V100x1_rank0"), "--summary"});
  ASSERT_EQ(ns.status, 0) << ns.err;
  EXPECT_NE(ns.out.find("GPU-bound: the GPU idles 1%"), std::string::npos) << ns.out;
  EXPECT_NE(ns.out.find("predicted from these layers on its machine (-1.1% from the measured step)"), std::string::npos)
      << ns.out;
  const auto legacy = run_cli({"profile", "--import-kineto", real_trace("kineto_tbplugin_resnet50_V100x1_legacy"),
                               "--summary", "--granularity", "4"});
  ASSERT_EQ(legacy.status, 0) << legacy.err;
  EXPECT_NE(legacy.out.find("the 2021 schema"), std::string::npos) << legacy.out;
  EXPECT_NE(legacy.out.find("4 layers (--granularity 4) after the data loader's, batch 32"), std::string::npos)
      << legacy.out;
  EXPECT_NE(legacy.out.find("data loader"), std::string::npos) << legacy.out;
}

TEST(KinetoCli, EachBadCombinationIsOneErrorLine) {
  const std::string trace = real_trace("hta_ns_resolution_V100x1_rank0");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"profile", "--import-kineto", trace}, "--batch: is needed"},
      {{"profile", "--import-kineto", trace, "--model", "vgg16"}, "--model: given with --import-kineto"},
      {{"profile", "--import-kineto", trace, "--analytic"}, "--analytic: given with --import-kineto"},
      {{"profile", "--import-kineto", trace, "--granularity", "none", "--summary"}, "--granularity: 'none'"},
      {{"profile", "--model", "vgg16", "--analytic", "--cluster", "p40x4-pcie3", "--summary"},
       "--summary: given without --import-kineto"},
      {{"profile", "--import-kineto", trace + ".missing", "--summary"}, "cannot be read"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << expected;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// A trace's layers as the workload text ASTRA-sim 1.0 and SimAI read: a line
// a layer, the A100 pair's parameters in the all-reduces.
TEST(KinetoCli, AnImportedTraceBecomesASimulatorsWorkload) {
  const fs::path profile = temp("ddp.json"), cluster = temp("ddp-cluster.json");
  ASSERT_EQ(run_cli({"profile", "--import-kineto", real_trace("hta_nccl_data_A100x2_resnet50_ddp_rank0"), "--batch",
                     "32", "--out", profile.string(), "--cluster-out", cluster.string()})
                .status,
            0);
  const auto r = run_cli({"predict", "--profile", profile.string(), "--cluster", cluster.string(), "--strategies",
                          "dp-overlap", "--quiet", "--workload-out", "-", "--workload-format", "simai"});
  fs::remove(profile);
  fs::remove(cluster);
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, count, line;
  std::getline(lines, header);
  std::getline(lines, count);
  EXPECT_EQ(header.rfind("DATA model_parallel_NPU_group: 1 ep: 1 pp: 1 ga: 1 all_gpus: 2 ", 0), 0u) << header;
  EXPECT_EQ(count, "107");
  double all_reduced = 0;
  int64_t layers = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    ASSERT_EQ(f.size(), 12u) << line;
    if (f[9] == "ALLREDUCE") all_reduced += std::stod(f[10]);
    ++layers;
  }
  EXPECT_EQ(layers, 107);
  EXPECT_NEAR(all_reduced, 4.0 * 25'557'032, 107);  // each layer's bytes rounded
  const auto bad = run_cli({"predict", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--workload-out", "-",
                            "--workload-format", "astra"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--workload-format: 'astra'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace trainsim
