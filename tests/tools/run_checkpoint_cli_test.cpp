// `trainsim run --checkpoint DIR --checkpoint-every N` and `--resume DIR`: a
// run stopped at a checkpoint and resumed trains as the run never stopped
// (a synchronous strategy); resuming another run, one already done, or a
// damaged checkpoint is refused with one line naming what is wrong.
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

std::vector<std::string> gpipe_run(const std::string& iterations, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"run", "--model", "fmnist-mlp", "--strategy", "gpipe", "--set", "microbatches=2",
                                   "--devices", "cpu:2", "--iterations", iterations, "--batch", "8", "--seed", "5",
                                   "--json", "-", "--quiet"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class RunCheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("trainsim-run-checkpoint-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RunCheckpointCli, AResumedRunTrainsAsTheRunNeverStopped) {
  const auto whole = run_cli(gpipe_run("6"));
  ASSERT_EQ(whole.status, 0) << whole.err;
  const auto first = run_cli(gpipe_run("4", {"--checkpoint", dir_, "--checkpoint-every", "2"}));
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/checkpoint.tmp"));
  const auto resumed = run_cli(gpipe_run("6", {"--resume", dir_}));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const nlohmann::json expected = nlohmann::json::parse(whole.out), got = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(got["iterations"], 6);
  EXPECT_EQ(got["loss_per_iteration"], expected["loss_per_iteration"]);  // the first four from the checkpoint
  EXPECT_EQ(got["test_accuracy"], expected["test_accuracy"]);
}

TEST_F(RunCheckpointCli, RefusesAnotherRunsCheckpointOrOneAlreadyDone) {
  ASSERT_EQ(run_cli(gpipe_run("2", {"--checkpoint", dir_, "--checkpoint-every", "2"})).status, 0);
  std::vector<std::string> other_seed = gpipe_run("4", {"--resume", dir_});
  other_seed[other_seed.size() - 6] = "6";  // --seed 5 -> 6
  ASSERT_EQ(other_seed[other_seed.size() - 7], "--seed");
  const auto seed = run_cli(other_seed);
  EXPECT_EQ(seed.status, 2);
  EXPECT_NE(seed.err.find("seed is 5, this run's 6"), std::string::npos) << seed.err;
  const auto done = run_cli(gpipe_run("2", {"--resume", dir_}));
  EXPECT_EQ(done.status, 2);
  EXPECT_NE(done.err.find("--iterations"), std::string::npos) << done.err;
  const auto alone = run_cli(gpipe_run("2", {"--checkpoint-every", "2"}));
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--checkpoint"), std::string::npos) << alone.err;
  // A damaged checkpoint: one line, nothing trained.
  std::filesystem::resize_file(dir_ + "/checkpoint", std::filesystem::file_size(dir_ + "/checkpoint") - 5);
  const auto damaged = run_cli(gpipe_run("4", {"--resume", dir_}));
  EXPECT_EQ(damaged.status, 2);
  EXPECT_NE(damaged.err.find("truncated"), std::string::npos) << damaged.err;
  EXPECT_TRUE(damaged.out.empty()) << damaged.out;
  const auto missing = run_cli(gpipe_run("4", {"--resume", dir_ + "/nothing"}));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("holds no checkpoint"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace trainsim
