// `trainsim profile --device cpu` (and cuda): the measured profile and cluster files the
// command writes, and the one-line errors for devices it cannot measure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "exec/devices.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("trainsim_profile_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(ProfileDeviceCli, CpuWritesAMeasuredProfileAndClusterThatValidate) {
  const auto dir = temp_dir();
  const std::string profile_path = (dir / "p.json").string(), cluster_path = (dir / "c.json").string();
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--batch", "32", "--device", "cpu:2", "--repeats", "3",
                          "--out", profile_path, "--cluster-out", cluster_path, "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Profile p = read_profile_file(profile_path);
  EXPECT_EQ(p.source, "measured");
  EXPECT_EQ(p.batch_size, 32);
  EXPECT_EQ(p.layers.size(), 7u);  // flatten, fc1, relu1, fc2, relu2, fc3, softmax
  EXPECT_NE(p.device.name.find("(2 threads)"), std::string::npos) << p.device.name;
  const Cluster c = load_cluster(cluster_path);
  EXPECT_EQ(c.name, "cpu2-measured");
  EXPECT_EQ(c.devices_per_machine, 2);
  // The two files feed predict directly.
  const auto predict = run_cli({"predict", "--profile", profile_path, "--cluster", cluster_path, "--strategies",
                                "single", "--quiet"});
  EXPECT_EQ(predict.status, 0) << predict.err;
  std::filesystem::remove_all(dir);
}

TEST(ProfileDeviceCli, RejectsAnUnknownDeviceNamingTheFlag) {
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--device", "tpu", "--out", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'tpu'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(ProfileDeviceCli, MalformedGpuDevicesAreRejectedNamingTheFlag) {
  for (const char* device : {"cuda:", "cudax", "cuda:-1", "cuda:a", "cuda:0x0", "cuda:0x65", "cuda:0y2", "cuda:0x"}) {
    const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--device", device, "--out", "-"});
    EXPECT_EQ(r.status, 2) << device;
    EXPECT_NE(r.err.find("--device"), std::string::npos) << device << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << device;
  }
}

// A GPU is profiled from one process: by several ranks at once each would
// measure it shared with the others, and all would write the same files.
TEST(ProfileDeviceCli, AGpuProfiledBySeveralProcessesIsRefused) {
  const auto r =
      run_cli({"profile", "--model", "fmnist-mlp", "--device", "cuda:0x2", "--launcher", "mpi", "--out", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("trainsim: error: --device: is a GPU profiled by several processes"), 0u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(ProfileDeviceCli, AModelWithoutGpuKernelsIsNamedBeforeAnyGpuIsTouched) {
  const auto r = run_cli({"profile", "--model", "googlenet", "--device", "cuda:0", "--out", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.err.find("op 'concat'") != std::string::npos || r.err.find("without CUDA") != std::string::npos)
      << r.err;
}

// Without a GPU (or CUDA) one clear line; with one, a GPU profile.
TEST(ProfileDeviceCli, CudaProfilesWhereAGpuIsAndSaysWhyNotElsewhere) {
  std::string reason;
  const bool has_gpu = !list_cuda_devices(reason).empty();
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--batch", "64", "--repeats", "3", "--device", "cuda:0",
                          "--out", "-", "--quiet"});
  if (!has_gpu) {
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  const Profile profile = profile_from_json(nlohmann::json::parse(r.out), "cuda profile");
  EXPECT_EQ(profile.device.kind, "gpu");
  EXPECT_EQ(profile.batch_size, 64);
  for (const LayerProfile& layer : profile.layers) EXPECT_GT(layer.forward_s + layer.backward_s, 0.0) << layer.name;
}

// Virtual workers on one GPU: the cluster says they share it and how fast
// each of them trains the model while all do; without a GPU, one line.
TEST(ProfileDeviceCli, VirtualGpuWorkersMeasureWhatSharingLeavesEach) {
  std::string reason;
  const bool has_gpu = !list_cuda_devices(reason).empty();
  const auto dir = temp_dir();
  const std::string cluster_path = (dir / "cuda2.json").string();
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--batch", "64", "--repeats", "3", "--device", "cuda:0x2",
                          "--out", "-", "--cluster-out", cluster_path, "--quiet"});
  if (!has_gpu) {
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  const Cluster c = load_cluster(cluster_path);
  EXPECT_EQ(c.devices_per_machine, 2);
  EXPECT_EQ(c.shared_devices, 1);
  EXPECT_GT(c.device.compute_rate_while_shared, 0.0);
  EXPECT_LE(c.device.compute_rate_while_shared, 1.0);
  EXPECT_NE(c.description.find("compute_rate_while_shared"), std::string::npos) << c.description;
  std::filesystem::remove_all(dir);
}

// validate of two strategies on `devices` at fmnist-mlp, one short round:
// where `gpus` GPUs answer, each strategy run and predicted; else one line
// naming --devices.
void expect_validate_runs_where_gpus(const std::string& devices, const std::string& strategies, size_t gpus) {
  std::string reason;
  const bool has_gpus = list_cuda_devices(reason).size() >= gpus;
  std::vector<std::string> args = {"validate", "--model",  "fmnist-mlp", "--devices",    devices, "--strategies",
                                   strategies, "--rounds", "1",          "--iterations", "10",    "--repeats",
                                   "5",        "--json",   "-",          "--quiet"};
  // Fashion-MNIST from where the GPU check unpacked it (a GPU machine may lack Debian's).
  if (const char* data = std::getenv("TRAINSIM_TEST_FASHION_MNIST"); data != nullptr && *data != '\0') {
    args.insert(args.end(), {"--data-dir", data});
  }
  const auto r = run_cli(args);
  if (!has_gpus) {
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.find("trainsim: error: --devices"), 0u) << r.err;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v["results"].size(), 2u) << r.out;
  for (const nlohmann::json& s : v["results"]) {
    EXPECT_FALSE(s.contains("skipped") && !s["skipped"].get<std::string>().empty()) << s.dump();
    EXPECT_GT(s["measured_s"].get<double>(), 0) << s.dump();
    EXPECT_GT(s["predicted_simulated_s"].get<double>(), 0) << s.dump();
  }
}

// validate on virtual GPU workers: profiled and probed on the GPU, each
// strategy run there and predicted with the GPU shared; without a GPU, one line.
TEST(ProfileDeviceCli, ValidateRunsOnVirtualGpuWorkers) {
  expect_validate_runs_where_gpus("cuda:0x2", "single,dp-ring", 1);
}

// A GPU each (cuda:0,1): the layers profiled on GPU 0, the cluster one
// machine of two GPUs, neither shared, its boundaries between them and its
// collectives on the host measured; without two GPUs, one line naming the
// flag.
TEST(ProfileDeviceCli, AGpuEachIsMeasuredAsOneMachineOfGpus) {
  std::string reason;
  const bool has_gpus = list_cuda_devices(reason).size() >= 2;
  const auto dir = temp_dir();
  const std::string cluster_path = (dir / "gpus.json").string();
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--batch", "64", "--repeats", "3", "--device", "cuda:0,1",
                          "--out", "-", "--cluster-out", cluster_path, "--quiet"});
  if (!has_gpus) {
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.find("trainsim: error: --device"), 0u) << r.err;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  const Cluster c = load_cluster(cluster_path);
  EXPECT_EQ(c.machines, 1);
  EXPECT_EQ(c.devices_per_machine, 2);
  EXPECT_EQ(c.shared_devices, 0);
  EXPECT_GT(c.collective.pack_bytes_per_s, 0);
  EXPECT_NE(c.description.find("a worker per GPU"), std::string::npos) << c.description;
  std::filesystem::remove_all(dir);
}

// validate with a GPU each: profiled on the first GPU, the GPUs probed, each
// strategy run with a worker on each; without two GPUs, one line.
TEST(ProfileDeviceCli, ValidateRunsOnAGpuEach) { expect_validate_runs_where_gpus("cuda:0,1", "dp-ring,gpipe", 2); }

TEST(ProfileDeviceCli, CpuThreadsMustAgreeWithConcurrent) {
  const auto bad_count = run_cli({"profile", "--model", "fmnist-mlp", "--device", "cpu:0", "--out", "-"});
  EXPECT_EQ(bad_count.status, 2);
  EXPECT_NE(bad_count.err.find("--device"), std::string::npos) << bad_count.err;
  const auto clash =
      run_cli({"profile", "--model", "fmnist-mlp", "--device", "cpu:2", "--concurrent", "3", "--out", "-"});
  EXPECT_EQ(clash.status, 2);
  EXPECT_NE(clash.err.find("--concurrent"), std::string::npos) << clash.err;
}

TEST(ProfileDeviceCli, ClusterOutNeedsAMeasuredDevice) {
  const auto r = run_cli({"profile", "--model", "fmnist-mlp", "--analytic", "--cluster", "p40x4-pcie3",
                          "--cluster-out", "c.json", "--out", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--cluster-out"), std::string::npos) << r.err;
}

TEST(ProfileDeviceCli, ThreadCountsPastTheLimitAreRejectedBeforeAnyThreadStarts) {
  // Once an abort after 2 GB of per-thread networks; now one line, at once.
  const std::vector<std::vector<std::string>> cases = {{"--device", "cpu:100000"},
                                                       {"--device", "cpu", "--concurrent", "100000"}};
  for (const std::vector<std::string>& flags : cases) {
    std::vector<std::string> args = {"profile", "--model", "fmnist-mlp", "--out", "-"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(flags.size() == 2 ? "--device" : "--concurrent"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("per core"), std::string::npos) << r.err;  // the limit, stated
    EXPECT_TRUE(r.out.empty());
  }
}

}  // namespace
}  // namespace trainsim
