// `trainsim run`: trains for real and reports trainsim.run/1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "exec/data/idx.hpp"
#include "exec/devices.hpp"
#include "tests/exec/data/idx_files.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

TEST(RunCli, TrainsDataParallelOnTwoThreadsAndReportsTheRun) {
  const auto r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2",
                          "--iterations", "6", "--batch", "16", "--json", "-", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "trainsim.run/1");
  EXPECT_EQ(j["strategy"], "dp-ring");
  EXPECT_EQ(j["iterations"], 6);
  EXPECT_DOUBLE_EQ(j["samples_per_iteration"].get<double>(), 32);  // 2 workers x 16
  ASSERT_EQ(j["loss_per_iteration"].size(), 6u);
  // Ten classes from random initial weights: the first loss is near ln 10.
  EXPECT_NEAR(j["loss_per_iteration"][0].get<double>(), std::log(10.0), 0.5);
  EXPECT_GT(j["iteration_s"].get<double>(), 0);
  EXPECT_GE(j["test_accuracy"].get<double>(), 0);
  EXPECT_LE(j["test_accuracy"].get<double>(), 1);
}

// --no-evaluate trains the same and leaves the test set unscored (its
// forward on the host is most of a short timing run's time).
TEST(RunCli, NoEvaluateTrainsAlikeAndLeavesTheTestAccuracyNull) {
  const std::vector<std::string> args = {"run",   "--model",      "fmnist-mlp", "--strategy", "dp-ring", "--devices",
                                         "cpu:2", "--iterations", "3",          "--batch",    "16",      "--json",
                                         "-",     "--quiet"};
  std::vector<std::string> unscored = args;
  unscored.push_back("--no-evaluate");
  const auto scored_run = run_cli(args);
  const auto unscored_run = run_cli(unscored);
  ASSERT_EQ(scored_run.status, 0) << scored_run.err;
  ASSERT_EQ(unscored_run.status, 0) << unscored_run.err;
  const nlohmann::json scored = nlohmann::json::parse(scored_run.out);
  const nlohmann::json j = nlohmann::json::parse(unscored_run.out);
  EXPECT_TRUE(scored["test_accuracy"].is_number());
  EXPECT_TRUE(j["test_accuracy"].is_null());
  EXPECT_EQ(j["loss_per_iteration"], scored["loss_per_iteration"]);
  const auto summary = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--devices", "cpu:1",
                                "--iterations", "3", "--batch", "16", "--no-evaluate"});
  ASSERT_EQ(summary.status, 0) << summary.err;
  EXPECT_NE(summary.out.find("test accuracy not measured (--no-evaluate)"), std::string::npos) << summary.out;
}

// text-bag reads fortunes of four topics as bags of words by default and
// learns them: above the largest topic's share (computers, about 34%).
TEST(RunCli, TextBagTrainsOnFortuneTopicsByDefault) {
  if (!std::filesystem::exists("/usr/share/games/fortunes/computers")) {
    GTEST_SKIP() << "Debian's fortunes are not installed";
  }
  const auto r = run_cli({"run", "--model", "text-bag", "--strategy", "parallax", "--devices", "cpu:2",
                          "--iterations", "150", "--json", "-", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dataset"], "fortune-topics");
  EXPECT_NEAR(j["loss_per_iteration"][0].get<double>(), std::log(4.0), 0.3);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.5);
  // A model of other classes is refused that data set.
  const auto other = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--dataset", "fortune-topics",
                              "--iterations", "1"});
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("fortune-topics"), std::string::npos) << other.err;
}

TEST(RunCli, SameSeedRepeatsTheLossesExactly) {
  const std::vector<std::string> args = {"run", "--model", "fmnist-mlp", "--strategy", "gpipe", "--devices", "cpu:2",
                                         "--iterations", "4", "--batch", "16", "--seed", "3", "--json", "-",
                                         "--quiet"};
  const auto a = run_cli(args);
  const auto b = run_cli(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["loss_per_iteration"], nlohmann::json::parse(b.out)["loss_per_iteration"]);
}

// GPU workers: malformed devices, a model without GPU kernels and a
// missing GPU (or CUDA) each give one line naming what to change, for run
// and validate alike (GPU workers across MPI processes:
// tests/mpi/run_under_mpirun.py).
TEST(RunCli, GpuWorkersAreCheckedBeforeAnyDataLoads) {
  for (const char* devices :
       {"cuda:x2", "cuda:0x0", "cuda:0x65", "cudax", "cuda:0,0", "cuda:0,", "cuda:0,1x2", "cuda:,1"}) {
    const auto r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", devices,
                            "--iterations", "1"});
    EXPECT_EQ(r.status, 2) << devices;
    EXPECT_NE(r.err.find("--devices: '" + std::string(devices) + "'"), std::string::npos) << r.err;
  }
  auto r = run_cli({"run", "--model", "googlenet", "--strategy", "single", "--devices", "cuda:0", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
#if defined(TRAINSIM_WITH_CUDA)
  EXPECT_NE(r.err.find("op 'concat' has no CUDA kernel"), std::string::npos) << r.err;
#else
  EXPECT_NE(r.err.find("without CUDA"), std::string::npos) << r.err;
#endif
  r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cuda:63x2", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("trainsim: error: --devices"), 0u) << r.err;
  std::string reason;
  if (list_cuda_devices(reason).size() < 2) {  // a GPU per worker: NCCL's, which needs them all
    r = run_cli(
        {"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cuda:0,1", "--iterations", "1"});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.find("trainsim: error: --devices"), 0u) << r.err;
    // validate and profile take a GPU each too, and fail on the GPU missing.
    r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cuda:0,1"});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.find("trainsim: error: --devices"), 0u) << r.err;
    r = run_cli({"profile", "--model", "fmnist-mlp", "--device", "cuda:0,1", "--out", "-"});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.find("trainsim: error: --device"), 0u) << r.err;
  }
  r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cuda:0x2", "--launcher", "mpi"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("across MPI processes"), std::string::npos) << r.err;
  r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cuda:63x2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("trainsim: error: --devices"), 0u) << r.err;
  r = run_cli({"validate", "--model", "googlenet", "--devices", "cuda:0x2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("trainsim: error: "), 0u) << r.err;
  r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--precision", "bf16"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--precision"), std::string::npos) << r.err;
}

// --precision: fp32 anywhere, tf32 or bf16 with GPU workers only, nothing
// else; each refused in one line before anything runs (trainsim profile alike).
TEST(RunCli, PrecisionIsFp32OrTf32OrBf16OnAGpu) {
  auto r =
      run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--precision", "tf32", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "trainsim: error: --precision: tf32 on CPU workers (fp32, or tf32 or bf16 on a GPU (cuda, cuda:N: "
            "its tensor cores))\n");
  r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--devices", "cuda", "--precision", "fp16",
               "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--precision: 'fp16' is not a precision (fp32, tf32 or bf16)"), std::string::npos) << r.err;
  r = run_cli({"profile", "--model", "fmnist-mlp", "--device", "cpu", "--precision", "tf32", "--out", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--precision: tf32 on CPU workers"), std::string::npos) << r.err;
  r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--precision", "bf16", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--precision: bf16 on CPU workers"), std::string::npos) << r.err;
  r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--precision", "fp32", "--iterations", "1",
               "--batch", "8", "--json", "-", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["precision"], "fp32");
}

TEST(RunCli, BadDevicesAndUnexecutedSettingsAreInputErrors) {
  auto r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "single", "--devices", "tpu:2", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--devices"), std::string::npos) << r.err;
  // Compressed gradients are reduced hop by hop around the ring only.
  r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "pipesgd", "--devices", "cpu:2", "--iterations", "1",
               "--set", "compression=trunc16", "--set", "algorithm=tree"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--set algorithm"), std::string::npos) << r.err;
  // ImageNet's 3x224x224 is no Fashion-MNIST sample.
  r = run_cli({"run", "--model", "resnet50", "--strategy", "single", "--iterations", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--dataset"), std::string::npos) << r.err;
}

TEST(RunCli, RunsTheStaleWeightStrategies) {
  // DSP's recomputation, DualPipe's SpecTrain and Pipe-SGD's compressed ring.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--strategy", "dsp"}, std::vector<std::string>{"--strategy", "dualpipe"},
        std::vector<std::string>{"--strategy", "pipesgd", "--set", "compression=quant8"}}) {
    std::vector<std::string> args = {"run", "--model", "fmnist-mlp", "--devices", "cpu:2", "--iterations", "3",
                                     "--batch", "16", "--json", "-", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    ASSERT_EQ(r.status, 0) << extra[1] << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["loss_per_iteration"].size(), 3u) << extra[1];
    for (const auto& loss : j["loss_per_iteration"]) EXPECT_TRUE(std::isfinite(loss.get<double>())) << extra[1];
  }
}

TEST(RunCli, WarnsOnceBeforeTrainingWhenStaleGradientsMeetMomentum) {
  // pipesgd's defaults (width 2: gradients 1 iteration stale) with run's
  // momentum 0.9: 0.9 + the delay's 0.5 is not below 1.
  const std::vector<std::string> common = {"run", "--model", "fmnist-mlp", "--devices", "cpu:2",
                                           "--iterations", "2", "--quiet"};
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--strategy", "pipesgd"});
  auto r = run_cli(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.rfind("trainsim: warning: pipesgd's gradients are 1 iteration stale, which adds momentum of "
                        "about 0.5; with --momentum 0.9 the total, 1.4, is not below 1", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("set --momentum 0.4 ("), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Not without staleness, nor at the momentum it suggests.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--strategy", "single"}, std::vector<std::string>{"--strategy", "dp-ring"},
        std::vector<std::string>{"--strategy", "pipesgd", "--momentum", "0.4"}}) {
    args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    r = run_cli(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "") << extra[1];
  }
}

TEST(RunCli, ADivergingRunStopsThereFailsAndWritesNothing) {
  const std::filesystem::path json = std::filesystem::temp_directory_path() /
                                     ("trainsim-diverged-" + std::to_string(getpid()) + ".json");
  std::filesystem::remove(json);
  const auto r = run_cli({"run", "--model", "fmnist-mlp", "--strategy", "dp-ring", "--devices", "cpu:2",
                          "--iterations", "1000", "--batch", "16", "--learning-rate", "1e30", "--json",
                          json.string(), "--quiet"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("trainsim: failed: the training loss diverged at iteration 1 (it is ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("with --learning-rate 1e+30; try a smaller --learning-rate\n"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(json));
}

}  // namespace
}  // namespace trainsim
