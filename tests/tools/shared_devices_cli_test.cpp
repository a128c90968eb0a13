// The command line on virtual workers sharing a device (a cluster's
// shared_devices, as `profile --device cuda:GxW --cluster-out` writes it):
// what `cluster show` says of it, and how `predict` prices it.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "profiles/cluster.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::TempDir;

using Result = testing_fixtures::CliResult;

Result run(const std::vector<std::string>& args) { return testing_fixtures::run_cli(args); }

// An H100 cluster whose host takes, per forward, 80 us + 10 us a layer,
// per backward 100 + 10, per update 24 us a layer.
nlohmann::json h100_with_host_times() {
  nlohmann::json c = cluster_to_json(load_cluster("h100x8-nvlink"));
  c["device"]["host_per_op"] = {{"forward", {{"fixed_s", 80e-6}, {"per_layer_s", 10e-6}}},
                                {"backward", {{"fixed_s", 100e-6}, {"per_layer_s", 10e-6}}},
                                {"update", {{"fixed_s", 0}, {"per_layer_s", 24e-6}}}};
  return c;
}

// Virtual workers sharing a GPU (cuda:0x4's measured cluster): how many
// share each, and what each computes at while all do.
TEST(SharedDevicesCli, ClusterShowPrintsHowVirtualWorkersShareTheirDevice) {
  TempDir dir;
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["shared_devices"] = 1;
  const Result shared = run({"cluster", "show", dir.write("c.json", c.dump())});
  ASSERT_EQ(shared.status, 0) << shared.err;
  EXPECT_NE(shared.out.find("  virtual workers: 4 on each of 1 physical device(s) per machine, each computing at 0.25 "
                            "of its rate while all 4 compute (processor sharing)\n"),
            std::string::npos)
      << shared.out;
  c["device"]["compute_rate_while_shared"] = 0.7;
  const Result measured = run({"cluster", "show", dir.write("m.json", c.dump())});
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_NE(measured.out.find("each computing at 0.7 of its rate while all 4 compute\n"), std::string::npos)
      << measured.out;
  const Result preset = run({"cluster", "show", "p40x4-pcie3"});
  EXPECT_EQ(preset.out.find("virtual workers"), std::string::npos) << preset.out;
  EXPECT_EQ(preset.out.find("library AllReduce"), std::string::npos) << preset.out;
}

// A cluster whose library AllReduce has hops of its own (NCCL between GPUs):
// `cluster show` names them on the collectives' line.
TEST(SharedDevicesCli, ClusterShowNamesTheLibrarysOwnHops) {
  TempDir dir;
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["collective"]["library"] = {{"hop_bytes_per_s", 40e9}, {"hop_latency_s", 5e-6}};
  const Result shown = run({"cluster", "show", dir.write("c.json", c.dump())});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("; the library AllReduce's own hops "), std::string::npos) << shown.out;
}

// A GPU worker's host per compute op (a measured cluster's host_per_op):
// `cluster show` prints each kind's; a cluster without one says nothing of it.
TEST(SharedDevicesCli, ClusterShowPrintsAWorkersHostPerComputeOp) {
  TempDir dir;
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["device"]["host_per_op"] = {{"forward", {{"fixed_s", 80e-6}, {"per_layer_s", 10e-6}}},
                                {"update", {{"fixed_s", 0}, {"per_layer_s", 24e-6}}}};
  const Result shown = run({"cluster", "show", dir.write("c.json", c.dump())});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("  a worker's host per compute op: forward 80 us + 10 us a layer, backward 0 ns + 0 ns a "
                           "layer, update 0 ns + 24 us a layer\n"),
            std::string::npos)
      << shown.out;
  EXPECT_EQ(run({"cluster", "show", "p40x4-pcie3"}).out.find("host per compute op"), std::string::npos);
}

// predict on a cluster whose host takes longer per op than fmnist-cnn's
// kernels on an H100 at batch 64: single's iteration is the host's alone
// (forwards over 1, 3, 4 and 2 layers: 4 · 80 + 10 · 10 = 420 us;
// backwards 4 · 100 + 10 · 10 = 500 us; the update 10 · 24 = 240 us: 1.16
// ms), simulated and analytic (bounded by the host, docs/equations.md §12,
// saying so, in predict, simulate and choose); without the host's times the
// kernels' 258.8 us.
TEST(SharedDevicesCli, AnIterationTakesTheHostsTimePerOpWhereItIsTheLonger) {
  TempDir dir;
  nlohmann::json c = h100_with_host_times();
  const Result r = run({"predict", "--model", "fmnist-cnn", "--batch", "64", "--cluster",
                        dir.write("host.json", c.dump()), "--strategies", "single", "--method", "both", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto results = nlohmann::json::parse(r.out)["results"];
  ASSERT_EQ(results.size(), 2u);
  for (const auto& p : results) {
    EXPECT_NEAR(p["iteration_s"].get<double>(), 1.16e-3, 1e-9) << p["method"];
    EXPECT_DOUBLE_EQ(p["speedup_vs_single"].get<double>(), 1.0) << p["method"];  // the baseline bounded alike
  }
  const std::string notes =
      results[0]["method"] == "analytic" ? results[0]["notes"].dump() : results[1]["notes"].dump();
  EXPECT_NE(notes.find("host_per_op"), std::string::npos) << notes;
  // simulate's analytic figure and choose's ranking take the same bound.
  const Result simulated = run({"simulate", "--model", "fmnist-cnn", "--batch", "64", "--cluster",
                                dir.file("host.json"), "--strategy", "single", "--json", "-"});
  ASSERT_EQ(simulated.status, 0) << simulated.err;
  EXPECT_NEAR(nlohmann::json::parse(simulated.out)["analytic_iteration_s"].get<double>(), 1.16e-3, 1e-9);
  const Result chosen = run({"choose", "--model", "fmnist-cnn", "--batch", "64", "--cluster", dir.file("host.json"),
                             "--strategies", "single", "--json", "-"});
  ASSERT_EQ(chosen.status, 0) << chosen.err;
  EXPECT_NEAR(nlohmann::json::parse(chosen.out)["ranked"][0]["prediction"]["iteration_s"].get<double>(), 1.16e-3, 1e-9);
  c["device"].erase("host_per_op");
  const Result kernels =
      run({"predict", "--model", "fmnist-cnn", "--batch", "64", "--cluster", dir.write("kernels.json", c.dump()),
           "--strategies", "single", "--method", "both", "--json", "-"});
  ASSERT_EQ(kernels.status, 0) << kernels.err;
  for (const auto& p : nlohmann::json::parse(kernels.out)["results"]) {
    EXPECT_LT(p["iteration_s"].get<double>(), 0.3e-3) << p["method"];
  }
}

// PipeDream's one stage replicated over three workers, which take the
// iterations in turns: each worker's host takes a forward (80 + 10 · 10 us),
// a backward (100 + 10 · 10) and an update (10 · 24) every third iteration,
// 620 / 3 us an iteration, priced over whole periods (21 iterations, not 20,
// where one worker would take 7 of 20).
TEST(SharedDevicesCli, TheHostBoundOfWorkersTakingIterationsInTurnsIsOverWholePeriods) {
  TempDir dir;
  nlohmann::json c = h100_with_host_times();
  const Result r =
      run({"predict", "--model", "fmnist-cnn", "--batch", "64", "--cluster", dir.write("host.json", c.dump()),
           "--strategies", "pipedream", "--set", "stages=0-9", "--set", "replicas=3", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(nlohmann::json::parse(r.out)["results"][0]["iteration_s"].get<double>(), 620e-6 / 3, 1e-12);
}

// The bound needs the strategy's plan, which has limits the cost model
// does not (pipesgd's plan takes at most 4096 segments): past them the
// analytic figure is the cost model's own, saying why.
TEST(SharedDevicesCli, AnAnalyticFigureWhosePlanCannotBeMadeIsTheCostModelsSayingSo) {
  TempDir dir;
  const nlohmann::json c = h100_with_host_times();
  const std::string path = dir.write("host.json", c.dump());
  const Result r = run({"predict", "--model", "fmnist-cnn", "--batch", "64", "--cluster", path, "--strategies",
                        "pipesgd", "--set", "segments=5000", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out)["results"][0];
  EXPECT_GT(p["iteration_s"].get<double>(), 0.0);
  EXPECT_NE(p["notes"].dump().find("not bounded"), std::string::npos) << p["notes"];
  EXPECT_NE(p["notes"].dump().find("at most 4096 for a plan"), std::string::npos) << p["notes"];
}

// On virtual workers sharing one device the simulated rows share it and
// the analytic ones are bounded by its work (docs/equations.md §11), saying so.
TEST(SharedDevicesCli, PredictSharesTheDeviceBothWays) {
  TempDir dir;
  nlohmann::json c = cluster_to_json(load_cluster("p40x4-pcie3"));
  c["shared_devices"] = 1;
  const std::string path = dir.write("shared.json", c.dump());
  const Result r = run({"predict", "--model", "fmnist-mlp", "--batch", "64", "--cluster", path, "--strategies",
                        "single,dp-ring,gpipe", "--method", "both", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  std::map<std::pair<std::string, std::string>, nlohmann::json> by;
  for (const auto& p : doc["results"]) by[{p["strategy"].get<std::string>(), p["method"].get<std::string>()}] = p;
  const auto says = [&](const std::string& strategy, const std::string& method) {
    for (const auto& note : by.at({strategy, method})["notes"]) {
      if (note.get<std::string>().find("shared_devices") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_FALSE(says("single", "analytic"));  // one worker: nothing shared
  EXPECT_TRUE(says("dp-ring", "analytic"));
  EXPECT_FALSE(says("dp-ring", "simulated"));
  // Four workers on one device, each at a quarter: about four times single's step, both ways.
  for (const char* method : {"analytic", "simulated"}) {
    EXPECT_GT(by.at({"dp-ring", method})["iteration_s"].get<double>(),
              3 * by.at({"single", method})["iteration_s"].get<double>())
        << method;
  }
  const Result text = run({"predict", "--model", "fmnist-mlp", "--batch", "64", "--cluster", path, "--strategies",
                           "single,dp-ring,gpipe", "--method", "analytic"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("dp-ring: priced at the shared device's capacity"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace trainsim
