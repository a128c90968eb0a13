// `trainsim memory`: the configurations it lists, a hand-checked report and
// JSON, and one error line naming the flag for each bad setting.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

TEST(MemoryCli, ListsTheConfigurationsWithTheirSources) {
  const auto r = run_cli({"memory", "--list"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("megatron-1008b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpt3-175b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Table 1"), std::string::npos) << r.out;
}

// GPT-3 175B on t = 8, p = 16, no sequence parallelism or recomputation:
// 6 blocks of 12·12288²/8 + 7·12288/8 + 6·12288, V·h/8 and s·h; 96 layers'
// worth of 23·s·b·h activations (1F1B's 16 micro-batches of 6 layers).
TEST(MemoryCli, TheJsonHoldsEveryPartByHand) {
  const auto r = run_cli({"memory", "--model", "gpt3-175b", "--tp", "8", "--pp", "16", "--dp", "8", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double params = 6 * (226'492'416.0 + 10'752 + 73'728) + 50257.0 * 12288 / 8 + 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(j["params"].get<double>(), params);
  EXPECT_DOUBLE_EQ(j["weights_bytes"].get<double>(), 2 * params);
  EXPECT_DOUBLE_EQ(j["optimizer_bytes"].get<double>(), 12 * params);
  EXPECT_DOUBLE_EQ(j["activations_bytes"].get<double>(), 96 * 23 * 2048.0 * 12288);
  EXPECT_DOUBLE_EQ(j["total_bytes"].get<double>(), 16 * params + 96 * 23 * 2048.0 * 12288);
}

TEST(MemoryCli, TheTableNamesThePartsAndTheSettings) {
  const auto r = run_cli({"memory", "--model", "megatron-145.6b", "--tp", "8", "--pp", "8", "--dp", "8",
                          "--sequence-parallel", "--recompute", "selective", "--zero", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* part :
       {"weights", "gradients", "optimizer", "activations", "total", "sequence parallel", "selective recomputation",
        "ZeRO-1", "partitioned over 8 data-parallel devices", "80 layers' worth"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
}

TEST(MemoryCli, EachBadSettingIsOneLineNamingItsFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tp", "5"}, "--tp: 5 for gpt3-175b's 96 heads"},
      {{"--pp", "7"}, "--pp: 7 stages"},
      {{"--zero", "4"}, "--zero: 4"},
      {{"--interleave", "2"}, "--interleave: 2 without a pipeline"},
      {{"--micro-batch", "0"}, "--micro-batch: 0"},
      {{"--recompute", "some"}, "--recompute: 'some' (none, selective or full)"}};
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> args{"memory", "--model", "gpt3-175b"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << expected;
    EXPECT_EQ(r.err.find("trainsim: error: " + expected), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto r = run_cli({"memory", "--model", "gpt5"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model: 'gpt5' is not a transformer configuration"), std::string::npos) << r.err;
  r = run_cli({"memory"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model: is missing"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trainsim
