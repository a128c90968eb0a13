// A transformer configuration in `trainsim predict` and `simulate`: each
// way of spreading it at its fastest configuration that fits, the search's
// own pick of that family; its whole job simulated beside the closed form;
// one error line naming the flag or setting for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

nlohmann::json run_json(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

// What a family admits (transformer_search.hpp): a pipeline by its schedule,
// else tensor parallelism, else data parallelism by ZeRO stage.
std::string family_of(const nlohmann::json& t) {
  if (t["pp"].get<int64_t>() > 1) {
    return t["schedule"] == "zb-h1" ? "zb-h1" : t["interleave"].get<int64_t>() > 1 ? "interleaved-1f1b" : "1f1b";
  }
  if (t["tp"].get<int64_t>() > 1) return "tensor-parallel";
  const int zero = t["zero"].get<int>();
  return zero == 0 ? "data-parallel" : "zero-" + std::to_string(zero);
}

TEST(TransformerCli, PredictGivesEachWayOfSpreadingItsFastestConfigurationThatFits) {
  const nlohmann::json p = run_json({"predict", "--model", "llama2-7b", "--cluster", "dgx-a100", "--gpus", "64",
                                     "--global-batch", "512", "--json", "-"});
  ASSERT_EQ(p["format"], "trainsim.llm-prediction/1");
  // Plain data parallelism holds 16 bytes a parameter: 16 × 6,738,415,616 =
  // 107.8 GB, more than an A100's 80 GB; ZeRO-1 over 64 leaves 4 + 12/64.
  EXPECT_EQ(p["none_fit"], nlohmann::json::array({"data-parallel"}));
  const nlohmann::json search = run_json({"llm", "--model", "llama2-7b", "--search", "--gpus", "64", "--global-batch",
                                          "512", "--top", "100000", "--json", "-"});
  ASSERT_EQ(search["ranked"].size(), search["fit"].get<size_t>());
  ASSERT_EQ(p["families"].size(), 7u);
  for (const nlohmann::json& f : p["families"]) {
    const std::string family = f["family"];
    EXPECT_EQ(family_of(f["training"]), family);
    EXPECT_LE(f["memory"]["total_bytes"].get<double>(), 80e9) << family;
    EXPECT_FALSE(f.contains("simulated")) << family;  // --method analytic
    // The search's fastest of the family, and no faster one of it before.
    const auto first = std::find_if(search["ranked"].begin(), search["ranked"].end(),
                                    [&family](const nlohmann::json& k) { return k["family"] == family; });
    ASSERT_NE(first, search["ranked"].end()) << family;
    EXPECT_DOUBLE_EQ(f["analytic"]["iteration_s"].get<double>(), (*first)["iteration_s"].get<double>()) << family;
    for (const char* key : {"tp", "pp", "dp", "micro_batch", "interleave", "recompute", "zero", "schedule"}) {
      EXPECT_EQ(f["training"][key], (*first)[key]) << family << " " << key;
    }
  }
  const nlohmann::json two = run_json({"predict", "--model", "llama2-7b", "--cluster", "dgx-a100", "--gpus", "64",
                                       "--global-batch", "512", "--strategies", "zb-h1,zero-3", "--json", "-"});
  ASSERT_EQ(two["families"].size(), 2u);
  EXPECT_EQ(two["families"][0]["family"], "zb-h1");
  EXPECT_EQ(two["families"][1]["family"], "zero-3");
}

TEST(TransformerCli, PredictBothSimulatesEachWholeJobBesideItsClosedForm) {
  const std::vector<std::string> args = {"predict", "--model", "megatron-1.7b",  "--cluster", "dgx-a100",
                                         "--gpus",  "32",      "--global-batch", "512",       "--method",
                                         "both"};
  std::vector<std::string> json_args = args;
  json_args.insert(json_args.end(), {"--json", "-"});
  const nlohmann::json p = run_json(json_args);
  ASSERT_EQ(p["families"].size(), 8u);
  for (const nlohmann::json& f : p["families"]) {
    ASSERT_TRUE(f.contains("simulated")) << f["family"];
    EXPECT_TRUE(f["simulated"]["whole_job"].get<bool>()) << f["family"];
    EXPECT_GT(f["simulated"]["ops"].get<int64_t>(), 0);
    // No two collectives on one NIC here: within 2% of the closed form.
    EXPECT_NEAR(f["simulated"]["iteration_s"].get<double>() / f["analytic"]["iteration_s"].get<double>(), 1.0, 0.02)
        << f["family"];
  }
  const auto text = run_cli(args);
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* part : {"simulated vs analytic", "the whole job", "interleaved-1f1b", "zero-3", "t=1 p=2 d=16"}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  }
}

TEST(TransformerCli, PredictRefusesWhatATransformerDoesNotTake) {
  const std::vector<std::string> job = {"--cluster", "dgx-a100", "--gpus", "1024", "--global-batch", "1536"};
  const auto with = [&job](std::vector<std::string> args) {
    args.insert(args.begin(), {"predict", "--model", "gpt3-175b"});
    args.insert(args.end(), job.begin(), job.end());
    return args;
  };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {with({"--set", "tp=8"}), "--set: with a transformer --model"},
      {with({"--csv", "-"}), "--csv: with a transformer --model"},
      {with({"--strategies", "gpipe"}), "--strategies: 'gpipe' is not a way of spreading a transformer"},
      {{"predict", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--global-batch", "1536"}, "--gpus: is missing"},
      {{"predict", "--model", "gpt3-175b", "--cluster", "p40x4-pcie3", "--gpus", "8", "--global-batch", "8"},
       "--cluster: 'p40x4-pcie3' is not a GPU machine"},
      {{"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--gpus", "4"}, "--gpus: without a transformer"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << expected;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(TransformerCli, SimulateRunsTheWholeJobBesideTheClosedForm) {
  const std::vector<std::string> args = {"simulate", "--model", "megatron-39.1b", "--cluster", "dgx-a100",
                                         "--gpus",   "64",      "--global-batch", "64",        "--set",
                                         "tp=8",     "--set",   "pp=2",           "--set",     "recompute=full"};
  std::vector<std::string> json_args = args;
  json_args.insert(json_args.end(), {"--json", "-"});
  const nlohmann::json j = run_json(json_args);
  EXPECT_EQ(j["format"], "trainsim.simulation/1");
  EXPECT_EQ(j["gpus"], 64);
  EXPECT_EQ(j["training"]["dp"], 4);  // 64 GPUs over t·p = 16
  EXPECT_EQ(j["workers"].size(), 64u);
  EXPECT_NEAR(j["iteration_s"].get<double>() / j["analytic_iteration_s"].get<double>(), 1.0, 0.02);
  // The same job as `trainsim llm` prices it.
  const nlohmann::json llm = run_json({"llm", "--model", "megatron-39.1b", "--tp", "8", "--pp", "2", "--dp", "4",
                                       "--recompute", "full", "--global-batch", "64", "--json", "-"});
  EXPECT_DOUBLE_EQ(j["analytic_iteration_s"].get<double>(), llm["step"]["iteration_s"].get<double>());
  const auto text = run_cli(args);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("per pipeline stage"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" 0 (0) "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" 1 (32) "), std::string::npos) << text.out;  // stage 1's first GPU: 1·d·t
}

TEST(TransformerCli, SimulateNamesTheSettingOrFlagOfEachBadInput) {
  const auto with = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100"});
    return args;
  };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {with({"--global-batch", "64", "--strategy", "1f1b"}), "--strategy: with a transformer --model"},
      {with({"--global-batch", "64", "--set", "tpp=4"}), "--set tpp: is not a setting of a transformer"},
      {with({"--global-batch", "64", "--gpus", "64", "--set", "tp=8", "--set", "dp=4"}), "--set dp: 4: t·p·d is 32"},
      {with({"--global-batch", "100", "--gpus", "64", "--set", "tp=8"}), "--global-batch: 100"},
      {with({"--global-batch", "64", "--set", "zero=5"}), "--set zero: 5"},
      {with({"--global-batch", "64", "--set", "schedule=gpipe"}), "--set schedule: "},
      {with({"--global-batch", "64", "--gpus", "64", "--set", "tp=16"}), "--set tp: 16 GPUs"},
      {with({"--set", "tp=8"}), "--global-batch: is missing"},
      {with({"--global-batch", "1536", "--gpus", "1024", "--set", "tp=4", "--set", "pp=8", "--set", "interleave=4",
             "--set", "micro_batch=2", "--set", "flash_attention=true", "--set", "sequence_parallel=true", "--trace",
             "/dev/null"}),
       "--trace: the job's plan holds"},
      {{"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy", "single", "--global-batch", "4"},
       "--global-batch: without a transformer"},
      {{"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3"}, "--strategy: is missing"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.status, 2) << expected;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace trainsim
