// `trainsim chunk`, run in-process: the three methods' chunkings and
// backward_s in text and JSON, and the one-line error for bad flags.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using ChunkRun = testing_fixtures::CliResult;

ChunkRun run_chunk(std::vector<std::string> extra) {
  std::vector<std::string> args = {"chunk", "--model", "resnet152", "--batch", "12", "--cluster",
                                   "p100x4-nvlink-power8"};
  args.insert(args.end(), extra.begin(), extra.end());
  return testing_fixtures::run_cli(args);
}

// The chunks as JSON pairs cover layers 0..n-1 in order without gaps.
int64_t covered_layers(const nlohmann::json& chunks) {
  int64_t next = 0;
  for (const auto& c : chunks) {
    EXPECT_EQ(c[0].get<int64_t>(), next);
    next = c[1].get<int64_t>() + 1;
  }
  return next;
}

TEST(ChunkCli, ExactBeatsEveryPointOfTheUniformCurve) {
  const ChunkRun exact = run_chunk({"--json", "-"});
  const ChunkRun uniform = run_chunk({"--method", "uniform", "--json", "-"});
  ASSERT_EQ(exact.status, 0) << exact.err;
  ASSERT_EQ(uniform.status, 0) << uniform.err;
  const nlohmann::json e = nlohmann::json::parse(exact.out);
  const nlohmann::json u = nlohmann::json::parse(uniform.out);
  EXPECT_EQ(e["format"], "trainsim.chunking/1");
  EXPECT_EQ(e["workers"], 4);
  EXPECT_EQ(covered_layers(e["chunks"]), covered_layers(u["chunks"]));
  ASSERT_GT(u["curve"].size(), 2u);
  for (const auto& point : u["curve"]) EXPECT_LE(e["backward_s"].get<double>(), point["backward_s"].get<double>());
  // Chunking adds syncs and copies to backward: never below compute alone.
  EXPECT_GE(e["backward_s"].get<double>(), e["compute_backward_s"].get<double>());
}

TEST(ChunkCli, UniformPrintsTheCurveAndMarksItsBest) {
  const ChunkRun r = run_chunk({"--method", "uniform"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("chunk size"), std::string::npos);
  EXPECT_NE(r.out.find("best"), std::string::npos);
  EXPECT_NE(r.out.find("backward"), std::string::npos);
}

TEST(ChunkCli, HeuristicRunsAlgorithmOneFromChunkSizeOne) {
  const ChunkRun r = run_chunk({"--method", "heuristic", "--step", "4", "--range", "2", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_GE(j["trials"].size(), 4u);
  // Sizes 1, 2, 3 (below the step: +1), then 4, 8, ... (+step).
  EXPECT_EQ(j["trials"][0]["chunk_size"], 1);
  EXPECT_EQ(j["trials"][3]["chunk_size"], 4);
  EXPECT_EQ(j["step"], 4);
  EXPECT_EQ(j["interval"], 10);
}

TEST(ChunkCli, StepWithoutTheHeuristicIsAnError) {
  const ChunkRun r = run_chunk({"--step", "5"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("trainsim: error: --step"), std::string::npos) << r.err;
}

TEST(ChunkCli, UnknownMethodIsAnError) {
  const ChunkRun r = run_chunk({"--method", "greedy"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--method"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trainsim
