// The trainsim command line, run in-process: what a user sees for good input,
// and the one-line error with exit 2 for every kind of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model_json.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/cluster.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using Result = testing_fixtures::CliResult;

Result run(const std::vector<std::string>& args) { return testing_fixtures::run_cli(args); }

using testing_fixtures::TempDir;

// A valid two-layer profile; `patch` edits its JSON text.
std::string profile_text(const std::string& second_layer_inputs = "[\"a\"]", const std::string& backward_s = "0.004",
                         const std::string& format = "trainsim.profile/1", const std::string& forward_s = "0.002") {
  return R"({"format": ")" + format + R"(", "model": "two", "device": {"name": "d", "kind": "gpu"},
    "batch_size": 32, "source": "test", "layers": [
    {"name": "a", "inputs": ["input"], "forward_s": 0.001, "backward_s": 0.002, "param_bytes": 1e6, "activation_bytes": 4e6},
    {"name": "b", "inputs": )" + second_layer_inputs + R"(, "forward_s": )" + forward_s + R"(, "backward_s": )" +
         backward_s + R"(, "param_bytes": 2e6, "activation_bytes": 8e6}]})";
}

std::string zero_time_profile_text() {
  return R"({"format": "trainsim.profile/1", "model": "zero", "device": {"name": "d", "kind": "gpu"},
    "batch_size": 1, "layers": [{"name": "a", "inputs": ["input"], "forward_s": 0, "backward_s": 0,
    "param_bytes": 4, "activation_bytes": 4}]})";
}

std::string cluster_text(const std::string& kind = "gpu", const std::string& bandwidth = "12e9") {
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["device"]["kind"] = kind;
  c["intra_link"]["bandwidth_bytes_per_s"] = nlohmann::json::parse(bandwidth);
  return c.dump();
}

// profile_text() with the value at `pointer` (a JSON pointer) replaced.
std::string profile_with(const std::string& pointer, const nlohmann::json& value) {
  nlohmann::json doc = nlohmann::json::parse(profile_text());
  doc[nlohmann::json::json_pointer(pointer)] = value;
  return doc.dump();
}

// fmnist-mlp as a model file, with the value at `pointer` replaced.
std::string model_with(const std::string& pointer, const nlohmann::json& value) {
  nlohmann::json doc = model_to_json(build_zoo_model("fmnist-mlp"), 1);
  doc[nlohmann::json::json_pointer(pointer)] = value;
  return doc.dump();
}

std::string deeply_nested_profile_text() {
  return "{\"format\": \"trainsim.profile/1\", \"model\": " + std::string(100'000, '[') +
         std::string(100'000, ']') + "}";
}

TEST(Cli, PredictPrintsEveryStrategyOnABuiltInModel) {
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const StrategyInfo& s : strategy_registry()) EXPECT_NE(r.out.find("\n" + s.id + " "), std::string::npos) << s.id;
  EXPECT_NE(r.out.find("samples/s"), std::string::npos);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Cli, PredictJsonHasOneResultPerStrategyAndSpeedupOneForSingle) {
  const Result r = run({"predict", "--model", "resnet50", "--cluster", "h100x8-nvlink", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["format"], "trainsim.prediction/1");
  ASSERT_EQ(doc["results"].size(), strategy_registry().size());
  for (const auto& result : doc["results"]) {
    EXPECT_GT(result["iteration_s"].get<double>(), 0) << result["strategy"];
    const auto& b = result["breakdown_s"];
    const double sum = b["compute"].get<double>() + b["exposed_comm"].get<double>() +
                       b["idle_transfer"].get<double>() + b["idle_imbalance"].get<double>();
    EXPECT_NEAR(sum, result["iteration_s"].get<double>(), 1e-9 * sum) << result["strategy"];
    if (result["strategy"] == "single") {
      EXPECT_DOUBLE_EQ(result["speedup_vs_single"].get<double>(), 1.0);
    }
  }
}

TEST(Cli, PredictCsvHasAHeaderAndOneRowPerSelectedStrategy) {
  TempDir dir;
  const std::string profile = dir.write("p.json", profile_text());
  const Result r = run({"predict", "--profile", profile, "--cluster", "p40x4-pcie3", "--strategies",
                        "single,dp-ring", "--csv", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].rfind("model,cluster,batch_size,strategy", 0), 0u);
  EXPECT_NE(rows[2].find(",dp-ring,"), std::string::npos);
}

TEST(Cli, SetReachesOnlyTheStrategiesThatReadTheKey) {
  TempDir dir;
  const std::string profile = dir.write("p.json", profile_text());
  const Result r = run({"predict", "--profile", profile, "--cluster", "p40x4-pcie3", "--strategies",
                        "single,dp-ring", "--set", "workers=2", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["results"][0]["workers"], 1);
  EXPECT_EQ(doc["results"][1]["workers"], 2);
  EXPECT_EQ(doc["results"][1]["config"]["workers"], 2);
}

TEST(Cli, ZooAndClusterListsNameEveryEntry) {
  const Result zoo = run({"zoo", "list"});
  ASSERT_EQ(zoo.status, 0) << zoo.err;
  EXPECT_NE(zoo.out.find("resnet1001"), std::string::npos);
  const Result clusters = run({"cluster", "list"});
  ASSERT_EQ(clusters.status, 0) << clusters.err;
  for (const Cluster& c : cluster_presets()) EXPECT_NE(clusters.out.find(c.name), std::string::npos);
}

// How the workers' cores are shared, where the cluster says: a measured
// cluster's figures on one line; a preset without them shows none.
TEST(Cli, ClusterShowPrintsTheCoresSharingWhereTheClusterHasIt) {
  TempDir dir;
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["device"]["compute_rate_while_communicating"] = 0.98;
  c["device"]["collective_rate_while_computing"] = 0.2;
  c["shared_cores"] = 2;
  c["link_kernel_s_per_byte"] = 6e-10;
  const Result shown = run({"cluster", "show", dir.write("c.json", c.dump())});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("  cores: compute at 0.98 of its rate beside communication; a collective's cores' part at "
                           "0.2 beside compute; every worker on one computer's 2 cores; the links' kernel work 0.6 ns "
                           "per byte\n"),
            std::string::npos)
      << shown.out;
  const Result preset = run({"cluster", "show", "p40x4-pcie3"});
  ASSERT_EQ(preset.status, 0) << preset.err;
  EXPECT_EQ(preset.out.find("cores:"), std::string::npos) << preset.out;
}

TEST(Cli, ZooShowJsonCarriesTheParameterCount) {
  const Result r = run({"zoo", "show", "vgg16", "--batch", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["param_count"], 138357544);
  EXPECT_EQ(doc["batch_size"], 2);
  EXPECT_FALSE(doc["layers"].empty());
}

TEST(Cli, HelpExitsZeroAndShowsTheFlags) {
  const Result r = run({"predict", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--strategies"), std::string::npos);
}

TEST(Cli, ProfileAnalyticWritesAValidProfileFile) {
  TempDir dir;
  const std::string out = dir.file("vgg.json");
  const Result r = run({"profile", "--model", "vgg16", "--batch", "16", "--analytic", "--cluster", "p40x4-pcie3",
                        "--out", out});
  ASSERT_EQ(r.status, 0) << r.err;
  const Result predict = run({"predict", "--profile", out, "--cluster", "p40x4-pcie3", "--strategies", "single"});
  EXPECT_EQ(predict.status, 0) << predict.err;
}

TEST(Cli, ImportedPipedreamProfilePredictsWithItsOwnBatch) {
  TempDir dir;
  const std::string out = dir.file("vgg16-pd.json");
  const Result r = run({"profile", "--import-pipedream", std::string(TRAINSIM_TEST_DATA_DIR) +
                        "/pipedream/vgg16/graph.txt", "--out", out});
  ASSERT_EQ(r.status, 0) << r.err;
  const Result predict = run({"predict", "--profile", out, "--cluster", "p40x4-pcie3", "--json", "-"});
  ASSERT_EQ(predict.status, 0) << predict.err;
  const auto doc = nlohmann::json::parse(predict.out);
  // tests/data/pipedream/README.md: the Input node's 77,070,336 bytes are 128 images of 3x224x224 floats.
  EXPECT_EQ(doc["batch_size"], 128);
  EXPECT_EQ(doc["model"], "vgg16");
  // single: forward + backward sum to 672.5 ms in that README, plus an update of 553.4 MB (5 passes at 346 GB/s, 8 ms).
  const double single_s = doc["results"][0]["iteration_s"].get<double>();
  EXPECT_GT(single_s, 0.6725);
  EXPECT_LT(single_s, 0.6725 + 0.01);
}

TEST(Cli, SimulateWritesTraceAndPlanAndAgreesWithTheCostModelOnDpRing) {
  TempDir dir;
  const std::string trace = dir.file("trace.json"), plan = dir.file("plan.json");
  const Result r = run({"simulate", "--model", "resnet18", "--batch", "32", "--cluster", "p40x4-pcie3", "--strategy",
                        "dp-ring", "--iterations", "8", "--trace", trace, "--dump-plan", plan, "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["format"], "trainsim.simulation/1");
  // dp-ring's closed form is exact: one AllReduce after backward.
  EXPECT_NEAR(summary["iteration_s"].get<double>(), summary["analytic_iteration_s"].get<double>(),
              1e-3 * summary["analytic_iteration_s"].get<double>());
  std::ifstream trace_file(trace), plan_file(plan);
  const auto trace_doc = nlohmann::json::parse(trace_file);
  const auto plan_doc = nlohmann::json::parse(plan_file);
  EXPECT_EQ(plan_doc["format"], "trainsim.plan/1");
  size_t complete = 0;
  for (const auto& e : trace_doc["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, plan_doc["ops"].size());  // one complete event per op
}

TEST(Cli, PredictBothPutsSimulatedBesideAnalytic) {
  const Result r = run({"predict", "--model", "vgg16-cifar10", "--cluster", "p40x4-pcie3", "--strategies",
                        "gpipe,pipedream", "--method", "both", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["results"].size(), 4u);
  EXPECT_EQ(doc["results"][0]["method"], "analytic");
  EXPECT_EQ(doc["results"][1]["method"], "simulated");
  EXPECT_EQ(doc["results"][1]["strategy"], "gpipe");
}

TEST(Cli, SimulateWithTheSameSeedRepeatsExactly) {
  const std::vector<std::string> args = {"simulate", "--model", "resnet164", "--cluster", "p40x4-pcie3", "--strategy",
                                         "gpipe", "--set", "stages=3", "--straggler", "0.3:2", "--seed", "9",
                                         "--json", "-"};
  const Result a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(nlohmann::json::parse(a.out)["seed"], 9);
}

TEST(Cli, JsonToDevNullLeavesItACharacterDevice) {
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--json", "/dev/null"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(Cli, JsonToDevStdoutPrintsTheDocument) {
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategies", "single",
                        "--json", "/dev/stdout", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["format"], "trainsim.prediction/1");
}

TEST(Cli, JsonThroughASymlinkKeepsTheLinkAndFillsItsTarget) {
  TempDir dir;
  std::filesystem::create_symlink(dir.file("target.json"), dir.file("link.json"));
  const Result r = run({"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategies", "single",
                        "--json", dir.file("link.json"), "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link.json")));
  std::ifstream target(dir.file("target.json"));
  EXPECT_EQ(nlohmann::json::parse(target)["format"], "trainsim.prediction/1");
}

TEST(Cli, AnErrorEchoingAHugeValueIsOneShortLine) {
  const Result r = run({"predict", "--model", std::string(1 << 20, 'x'), "--cluster", "p40x4-pcie3"});
  EXPECT_EQ(r.status, 2) << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 700u) << r.err.substr(0, 300);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  EXPECT_NE(r.err.find("xxxx... (10485"), std::string::npos) << r.err;  // its start and its length
}

TEST(Cli, PositiveNumberChecksPrintTheBoundNotTheLargestDouble) {
  const Result r = run({"predict", "--model", "vgg16", "--batch", "0", "--cluster", "p40x4-pcie3"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "trainsim: error: command line: --batch: Value 0 is not > 0 (see trainsim --help)\n");
}

TEST(Cli, HugeProfileValuesNeverReachTheOutputAsInfinity) {
  TempDir dir;
  const std::string profile = dir.write("p.json", profile_with("/layers/1/activation_bytes", 1e308));
  const Result r = run({"predict", "--profile", profile, "--cluster", "p40x4-pcie3", "--json", "-"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("layers[1].activation_bytes"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// Bad input: exit 2 and exactly one line "trainsim: error: <where>: <what> (<expected>)".
struct BadInput {
  std::string name;
  std::vector<std::string> args;  // "{profile}" and "{cluster}" are replaced by files, "{dir}" by a folder
  std::string profile;            // profile file contents ("" = none)
  std::string cluster;            // cluster file contents ("" = none)
  std::string where;              // must appear in the error line
};

// ctest's listing names a case by this rather than by its raw bytes.
void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ExitsTwoWithOneErrorLine) {
  const BadInput& c = GetParam();
  TempDir dir;
  std::vector<std::string> args;
  for (std::string a : c.args) {
    if (a == "{profile}") a = c.profile.empty() ? dir.file("missing.json") : dir.write("profile.json", c.profile);
    if (a == "{cluster}") a = dir.write("cluster.json", c.cluster);
    if (a == "{dir}") a = dir.file(".");
    args.push_back(a);
  }
  const Result r = run(args);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("trainsim: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(c.where), std::string::npos) << "error should name '" << c.where << "': " << r.err;
  EXPECT_NE(r.err.find('('), std::string::npos) << "error should say what was expected: " << r.err;
}

const std::vector<std::string> kPredictProfile = {"predict", "--profile", "{profile}", "--cluster", "p40x4-pcie3"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CliBadInput,
    ::testing::Values(
        BadInput{"MissingProfileFile", kPredictProfile, "", "", "missing.json"},
        BadInput{"MalformedJson", kPredictProfile, "{\"format\": ", "", "not valid JSON"},
        BadInput{"WrongFormat", kPredictProfile, profile_text("[\"a\"]", "0.004", "trainsim.model/1"), "", "format"},
        BadInput{"NegativeTime", kPredictProfile, profile_text("[\"a\"]", "-0.004"), "", "layers[1].backward_s"},
        BadInput{"InfiniteTime", kPredictProfile, profile_text("[\"a\"]", "1e999"), "", "profile.json"},
        BadInput{"TimeIsText", kPredictProfile, profile_text("[\"a\"]", "\"NaN\""), "", "layers[1].backward_s"},
        BadInput{"InputNamesNoEarlierLayer", kPredictProfile, profile_text("[\"c\"]"), "", "layers[1].inputs"},
        BadInput{"InputNamesALaterLayer", kPredictProfile, profile_text("[\"b\"]"), "", "layers[1].inputs"},
        BadInput{"AllTimesZero", kPredictProfile, zero_time_profile_text(), "", "forward_s and backward_s"},
        BadInput{"UnknownStrategy", with(kPredictProfile, {"--strategies", "dp-ring,warp"}), profile_text(), "",
                 "--strategies"},
        BadInput{"UnknownModel", {"predict", "--model", "vgg17", "--cluster", "p40x4-pcie3"}, "", "", "--model"},
        BadInput{"UnknownPreset", {"predict", "--model", "vgg16", "--cluster", "p41x4"}, "", "", "--cluster"},
        BadInput{"ZeroWorkers", with(kPredictProfile, {"--strategies", "dp-ring", "--set", "workers=0"}),
                 profile_text(), "", "--set workers"},
        BadInput{"MoreWorkersThanDevices", with(kPredictProfile, {"--strategies", "dp-ring", "--set", "workers=5"}),
                 profile_text(), "", "workers"},
        BadInput{"MoreStagesThanLayers",
                 with(kPredictProfile, {"--strategies", "gpipe", "--set", "stages=0-0,1-1,2-2"}), profile_text(), "",
                 "--set stages"},
        BadInput{"UnknownSetting", with(kPredictProfile, {"--strategies", "dp-ring", "--set", "widht=2"}),
                 profile_text(), "", "--set widht"},
        BadInput{"SettingWithoutValue", with(kPredictProfile, {"--set", "workers"}), profile_text(), "", "--set"},
        BadInput{"UnknownCompression",
                 with(kPredictProfile, {"--strategies", "pipesgd", "--set", "compression=zip"}), profile_text(), "",
                 "--set compression"},
        BadInput{"ClusterDeviceKind", {"predict", "--model", "vgg16", "--cluster", "{cluster}"}, "",
                 cluster_text("tpu"), "device.kind"},
        BadInput{"ClusterNegativeBandwidth", {"predict", "--model", "vgg16", "--cluster", "{cluster}"}, "",
                 cluster_text("gpu", "-1"), "intra_link.bandwidth_bytes_per_s"},
        BadInput{"ZeroBatch", {"predict", "--model", "vgg16", "--batch", "0", "--cluster", "p40x4-pcie3"}, "", "",
                 "--batch"},
        BadInput{"UnknownFlag", {"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--fast"}, "", "",
                 "--fast"},
        BadInput{"NoModel", {"predict", "--cluster", "p40x4-pcie3"}, "", "", "--profile"},
        BadInput{"UnknownCommand", {"predikt"}, "", "", "predikt"},
        BadInput{"UnknownMethod", with(kPredictProfile, {"--method", "quantum"}), profile_text(), "", "--method"},
        BadInput{"SimulateUnknownStrategy",
                 {"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy", "warp"}, "", "",
                 "--strategy"},
        BadInput{"StragglerWithoutSlowdown",
                 {"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy", "gpipe", "--straggler",
                  "0.3"},
                 "", "", "--straggler"},
        BadInput{"StragglerProbabilityAboveOne",
                 {"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy", "gpipe", "--straggler",
                  "1.5:2"},
                 "", "", "--straggler"},
        BadInput{"SimulateUnknownSetting",
                 {"simulate", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--strategy", "gpipe", "--set",
                  "widht=2"},
                 "", "", "--set widht"},
        BadInput{"EmptyCommandName", {""}, "", "", "command line: the command name is empty"},
        BadInput{"DeeplyNestedProfile", kPredictProfile, deeply_nested_profile_text(), "", "64 levels"},
        BadInput{"DirectoryAsProfile", {"predict", "--profile", "{dir}", "--cluster", "p40x4-pcie3"}, "", "",
                 "is a directory"},
        BadInput{"DirectoryAsCluster", {"predict", "--model", "vgg16", "--cluster", "{dir}"}, "", "",
                 "is a directory"},
        BadInput{"DirectoryAsModel", {"predict", "--model", "{dir}", "--cluster", "p40x4-pcie3"}, "", "",
                 "is a directory"},
        BadInput{"DirectoryAsConfig", {"predict", "--model", "vgg16", "--cluster", "p40x4-pcie3", "--config", "{dir}"},
                 "", "", "is a directory"},
        BadInput{"DirectoryAsPipedreamGraph", {"profile", "--import-pipedream", "{dir}"}, "", "", "is a directory"},
        BadInput{"NegativeSeed", with(kPredictProfile, {"--seed", "-1"}), profile_text(), "", "--seed"},
        BadInput{"EmptyJsonPath", with(kPredictProfile, {"--json", ""}), profile_text(), "", "--json"},
        BadInput{"UnknownDtype", kPredictProfile, profile_with("/dtype", "fp8-imaginary"), "", "dtype"},
        BadInput{"HugeActivationBytes", kPredictProfile, profile_with("/layers/1/activation_bytes", 1e308), "",
                 "layers[1].activation_bytes"},
        BadInput{"ModelFileUnknownOp", {"predict", "--model", "{profile}", "--cluster", "p40x4-pcie3"},
                 model_with("/layers/1/op", "teleport"), "", "layers[1].op"},
        BadInput{"ModelFileShapeThatDoesNotFit", {"predict", "--model", "{profile}", "--cluster", "p40x4-pcie3"},
                 model_with("/layers/2/output_shape", {7}), "", "layers[2].output_shape"},
        BadInput{"ModelFileLayerReadingNothing", {"predict", "--model", "{profile}", "--cluster", "p40x4-pcie3"},
                 model_with("/layers/2/inputs", nlohmann::json::array()), "", "layers[2].inputs"}),
    [](const ::testing::TestParamInfo<BadInput>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace trainsim
