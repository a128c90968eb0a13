// `trainsim llm`: the configurations it lists, a hand-checked report and
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

TEST(LlmCli, ListsTheConfigurationsWithTheirSources) {
  const auto r = run_cli({"llm", "--list"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("megatron-1008b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpt3-175b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Table 1"), std::string::npos) << r.out;
}

// GPT-3 175B on t = 8, p = 16, no sequence parallelism or recomputation:
// 6 blocks of 12·12288²/8 + 7·12288/8 + 6·12288, V·h/8 and s·h; 96 layers'
// worth of 23·s·b·h activations (1F1B's 16 micro-batches of 6 layers).
TEST(LlmCli, TheJsonHoldsEveryPartByHand) {
  const auto r = run_cli({"llm", "--model", "gpt3-175b", "--tp", "8", "--pp", "16", "--dp", "8", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double params = 6 * (226'492'416.0 + 10'752 + 73'728) + 50257.0 * 12288 / 8 + 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(j["params"].get<double>(), params);
  EXPECT_DOUBLE_EQ(j["weights_bytes"].get<double>(), 2 * params);
  EXPECT_DOUBLE_EQ(j["optimizer_bytes"].get<double>(), 12 * params);
  EXPECT_DOUBLE_EQ(j["activations_bytes"].get<double>(), 96 * 23 * 2048.0 * 12288);
  EXPECT_DOUBLE_EQ(j["total_bytes"].get<double>(), 16 * params + 96 * 23 * 2048.0 * 12288);
}

TEST(LlmCli, TheTableNamesThePartsAndTheSettings) {
  const auto r = run_cli({"llm", "--model", "megatron-145.6b", "--tp", "8", "--pp", "8", "--dp", "8",
                          "--sequence-parallel", "--recompute", "selective", "--zero", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* part :
       {"weights", "gradients", "optimizer", "activations", "total", "sequence parallel", "selective recomputation",
        "ZeRO-1", "partitioned over 8 data-parallel devices", "80 layers' worth"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
}

// Megatron's 1.7B row on four DGX A100 (t = 1, p = 1, d = 32, B = 512, full
// recomputation): the iteration's parts in the JSON, as
// tests/sim/cost/transformer_step_test.cpp prices them by hand.
TEST(LlmCli, WithAGlobalBatchTheIterationIsPriced) {
  const auto r = run_cli(
      {"llm", "--model", "megatron-1.7b", "--dp", "32", "--recompute", "full", "--global-batch", "512", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step"]["machine"], "dgx-a100");
  EXPECT_EQ(j["step"]["microbatches"], 16);
  EXPECT_NEAR(j["step"]["iteration_s"].get<double>(), 3.5085, 1e-3);  // TransformerStep.Megatrons17BOnFourDgxA100ByHand
  EXPECT_TRUE(j["fits"].get<bool>());
  const auto text = run_cli({"llm", "--model", "megatron-1.7b", "--dp", "32", "--recompute", "full", "--global-batch",
                             "512", "--gemm-efficiency", "0.5"});
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* part : {"micro-batch", "pipeline", "data parallel", "optimizer", "iteration", "50% of the"}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  }
  const auto bad = run_cli({"llm", "--model", "megatron-1.7b", "--dp", "32", "--global-batch", "100"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err.find("trainsim: error: --global-batch: 100 (a multiple of data × micro_batch (32))"), 0u)
      << bad.err;
  const auto zero3 =
      run_cli({"llm", "--model", "megatron-1.7b", "--pp", "2", "--dp", "16", "--zero", "3", "--global-batch", "512"});
  EXPECT_EQ(zero3.status, 2);
  EXPECT_NE(zero3.err.find("--zero: 3 with 2 pipeline stages"), std::string::npos) << zero3.err;
  const auto machine = run_cli({"llm", "--model", "megatron-1.7b", "--machine", "tpu"});
  EXPECT_EQ(machine.status, 2);
  EXPECT_NE(machine.err.find("--machine: 'tpu' is not a GPU machine"), std::string::npos) << machine.err;
}

// --profile-out and --cluster-out: one pipeline for the simulator, whose
// 1f1b iteration comes within 2% of the closed form's pipeline and
// optimizer step (tests/bench/megatron_table1.py --simulate, every row).
TEST(LlmCli, ThePipelineGoesToTheSimulator) {
  const std::string dir = ::testing::TempDir();
  const std::string profile = dir + "/llm-profile.json", cluster = dir + "/llm-cluster.json";
  const auto r = run_cli({"llm", "--model", "megatron-39.1b", "--tp", "8", "--pp", "2", "--dp", "32", "--recompute",
                          "full", "--global-batch", "1536", "--profile-out", profile, "--cluster-out", cluster});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--strategy 1f1b --set stages=0-24,25-49 --set microbatches=48"), std::string::npos) << r.out;
  const auto step =
      nlohmann::json::parse(run_cli({"llm", "--model", "megatron-39.1b", "--tp", "8", "--pp", "2", "--dp", "32",
                                     "--recompute", "full", "--global-batch", "1536", "--json", "-"})
                                .out)["step"];
  const auto sim =
      run_cli({"simulate", "--profile", profile, "--cluster", cluster, "--strategy", "1f1b", "--set",
               "stages=0-24,25-49", "--set", "microbatches=48", "--iterations", "3", "--json", "-", "--quiet"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  const double closed = step["pipeline_s"].get<double>() + step["optimizer_s"].get<double>();
  EXPECT_NEAR(nlohmann::json::parse(sim.out)["iteration_s"].get<double>() / closed, 1.0, 0.02);
  // ZB-H1: the simulator's zb-h1 with the layers' weight share, within 2% too.
  const std::vector<std::string> zb_args = {
      "llm", "--model",     "megatron-76.1b", "--tp",           "8",    "--pp",         "4", "--dp",
      "32",  "--recompute", "full",           "--global-batch", "1792", "--zero-bubble"};
  std::vector<std::string> files = zb_args;
  files.insert(files.end(), {"--profile-out", profile, "--cluster-out", cluster});
  const auto zb = run_cli(files);
  ASSERT_EQ(zb.status, 0) << zb.err;
  EXPECT_NE(zb.out.find("--strategy zb-h1 --set stages="), std::string::npos) << zb.out;
  EXPECT_NE(zb.out.find("--set weight_share="), std::string::npos) << zb.out;
  std::vector<std::string> as_json = zb_args;
  as_json.insert(as_json.end(), {"--json", "-"});
  const auto zb_step = nlohmann::json::parse(run_cli(as_json).out)["step"];
  const std::string share = std::to_string(zb_step["weight_share"].get<double>());
  const auto zb_sim = run_cli({"simulate", "--profile", profile, "--cluster", cluster, "--strategy", "zb-h1", "--set",
                               "stages=4", "--set", "microbatches=56", "--set", "weight_share=" + share, "--iterations",
                               "3", "--json", "-", "--quiet"});
  ASSERT_EQ(zb_sim.status, 0) << zb_sim.err;
  const double zb_closed = zb_step["pipeline_s"].get<double>() + zb_step["optimizer_s"].get<double>();
  EXPECT_NEAR(nlohmann::json::parse(zb_sim.out)["iteration_s"].get<double>() / zb_closed, 1.0, 0.02);
  EXPECT_LT(zb_step["bubble_s"].get<double>(), 0.7 * zb_step["microbatch_s"].get<double>() * 3);
  const auto alone = run_cli({"llm", "--model", "megatron-39.1b", "--profile-out", profile});
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--profile-out: without --global-batch"), std::string::npos) << alone.err;
}

TEST(LlmCli, TheWholeJobIsSimulatedBesideTheClosedForm) {
  const auto r = run_cli({"llm", "--model", "megatron-39.1b", "--tp", "8", "--pp", "2", "--dp", "4", "--recompute",
                          "full", "--global-batch", "64", "--simulate-job"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the whole job simulated (64 GPUs on 8 dgx-a100 machines"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from the closed form's"), std::string::npos) << r.out;
  const auto alone = run_cli({"llm", "--model", "megatron-39.1b", "--simulate-job"});
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--simulate-job: without --global-batch"), std::string::npos) << alone.err;
  const auto odd = run_cli({"llm", "--model", "megatron-39.1b", "--tp", "2", "--pp", "2", "--dp", "3", "--global-batch",
                            "48", "--simulate-job"});
  EXPECT_EQ(odd.status, 2);
  EXPECT_NE(odd.err.find("--dp: 12 GPUs in all (whole machines of 8"), std::string::npos) << odd.err;
}

TEST(LlmCli, TheSearchRanksTheConfigurationsThatFit) {
  const auto r = run_cli({"llm", "--model", "gpt3-175b", "--search", "--gpus", "1024", "--global-batch", "1536",
                          "--simulate", "3", "--top", "5", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["evaluated"].get<int64_t>(), j["fit"].get<int64_t>());
  ASSERT_EQ(j["ranked"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const auto& k = j["ranked"][i];
    EXPECT_EQ(k["tp"].get<int64_t>() * k["pp"].get<int64_t>() * k["dp"].get<int64_t>(), 1024);
    EXPECT_LE(k["memory_bytes"].get<double>(), 80e9);
    EXPECT_EQ(k["simulated_iteration_s"].get<double>() > 0, i < 3);
  }
  const auto text = run_cli({"llm", "--model", "gpt3-175b", "--search", "--gpus", "1024", "--global-batch", "1536"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("configurations priced"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("TFLOP/s a GPU"), std::string::npos) << text.out;
  const auto missing = run_cli({"llm", "--model", "gpt3-175b", "--search", "--global-batch", "1536"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--gpus: is missing"), std::string::npos) << missing.err;
}

// trainsim choose with a transformer: the same search, its winner and why.
TEST(LlmCli, ChooseSearchesATransformer) {
  const auto choose = run_cli({"choose", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024",
                               "--global-batch", "1536", "--json", "-"});
  ASSERT_EQ(choose.status, 0) << choose.err;
  const auto llm = run_cli({"llm", "--model", "gpt3-175b", "--search", "--gpus", "1024", "--global-batch", "1536",
                            "--simulate", "3", "--json", "-"});
  ASSERT_EQ(llm.status, 0) << llm.err;
  EXPECT_EQ(nlohmann::json::parse(choose.out)["ranked"][0], nlohmann::json::parse(llm.out)["ranked"][0]);
  const auto text =
      run_cli({"choose", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--global-batch", "1536"});
  EXPECT_NE(text.out.find("why rank 1: it fits"), std::string::npos) << text.out;
  const auto zoo = run_cli({"choose", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--gpus", "4"});
  EXPECT_EQ(zoo.status, 2);
  EXPECT_NE(zoo.err.find("--gpus: without a transformer --model"), std::string::npos) << zoo.err;
}

// With a global batch of fewer micro-batches than stages, the first stage
// holds only those: 145.6B on p = 8 with 96 sequences over d = 24 runs 4
// micro-batches, so 10 layers x 4 of 23·s·b·h (t = 8, nothing recomputed).
TEST(LlmCli, TheGlobalBatchBoundsTheMicroBatchesInFlight) {
  const auto r = run_cli({"llm", "--model", "megatron-145.6b", "--tp", "8", "--pp", "8", "--dp", "24", "--global-batch",
                          "96", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step"]["microbatches"], 4);
  EXPECT_DOUBLE_EQ(j["activations_bytes"].get<double>(), 10 * 4 * 23 * 2048.0 * 12288);
  const auto alone = run_cli({"llm", "--model", "megatron-145.6b", "--tp", "8", "--pp", "8", "--json", "-"});
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(alone.out)["activations_bytes"].get<double>(), 80 * 23 * 2048.0 * 12288);
}

TEST(LlmCli, EachBadSettingIsOneLineNamingItsFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tp", "5"}, "--tp: 5 for gpt3-175b's 96 heads"},
      {{"--pp", "7"}, "--pp: 7 stages"},
      {{"--zero", "4"}, "--zero: 4"},
      {{"--interleave", "2"}, "--interleave: 2 without a pipeline"},
      {{"--micro-batch", "0"}, "--micro-batch: 0"},
      {{"--recompute", "some"}, "--recompute: 'some' (none, selective or full)"}};
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> args{"llm", "--model", "gpt3-175b"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << expected;
    EXPECT_EQ(r.err.find("trainsim: error: " + expected), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto r = run_cli({"llm", "--model", "gpt5"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model: 'gpt5' is not a transformer configuration"), std::string::npos) << r.err;
  r = run_cli({"llm"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model: is missing"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trainsim
