// Predicting every strategy: the cost of `trainsim predict` apart from process
// start and printing. Checks the predictions first, then times them.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/transformer_plan.hpp"
#include "sim/search/transformer_search.hpp"

namespace trainsim {
namespace {

Profile zoo_profile(const std::string& model_name, const Cluster& cluster) {
  const Model model = build_zoo_model(model_name);
  return analytic_profile(model, model.default_batch, cluster);
}

// Every prediction must be a real number of seconds before anything is timed.
void check_predictions(const PredictionSet& set, benchmark::State& state) {
  for (const Prediction& p : set.results) {
    if (!(p.iteration_s > 0) || !(p.samples_per_s > 0)) {
      state.SkipWithError(("bad prediction for " + p.strategy).c_str());
    }
  }
}

void BM_PredictAllStrategies(benchmark::State& state, const std::string& model_name, const std::string& cluster_name) {
  const Cluster cluster = load_cluster(cluster_name);
  const Profile profile = zoo_profile(model_name, cluster);
  check_predictions(predict_analytic(profile, cluster, {}, {}), state);
  for (auto _ : state) {
    PredictionSet set = predict_analytic(profile, cluster, {}, {});
    benchmark::DoNotOptimize(set);
  }
  state.counters["layers"] = static_cast<double>(profile.layers.size());
  state.counters["strategies"] = static_cast<double>(strategy_registry().size());
}

// Every zoo model on one preset, every strategy at its defaults, profile
// included (what `trainsim predict --model M --cluster C` does): the time per
// pass over the zoo, and the slowest model's time as a counter (the goal is
// each model under 1 s).
void BM_PredictZoo(benchmark::State& state, const std::string& cluster_name) {
  const Cluster cluster = load_cluster(cluster_name);
  std::vector<Model> models;
  for (const ZooEntry& entry : zoo_entries()) models.push_back(build_zoo_model(entry.name));
  for (const Model& model : models) {
    check_predictions(predict_analytic(analytic_profile(model, model.default_batch, cluster), cluster, {}, {}), state);
  }
  double slowest_s = 0;
  std::string slowest;
  for (auto _ : state) {
    for (const Model& model : models) {
      const auto start = std::chrono::steady_clock::now();
      PredictionSet set = predict_analytic(analytic_profile(model, model.default_batch, cluster), cluster, {}, {});
      benchmark::DoNotOptimize(set);
      const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed_s > slowest_s) {
        slowest_s = elapsed_s;
        slowest = model.name;
      }
    }
  }
  state.counters["models"] = static_cast<double>(models.size());
  state.counters["slowest_model_s"] = slowest_s;
  state.SetLabel("slowest " + slowest);
}

void BM_AnalyticProfile(benchmark::State& state, const std::string& model_name) {
  const Cluster cluster = load_cluster("h100x8-nvlink");
  const Model model = build_zoo_model(model_name);
  for (auto _ : state) {
    Profile p = analytic_profile(model, model.default_batch, cluster);
    benchmark::DoNotOptimize(p);
  }
  state.counters["layers"] = static_cast<double>(model.layers.size());
}

void BM_BuildZooModel(benchmark::State& state, const std::string& model_name) {
  for (auto _ : state) {
    Model m = build_zoo_model(model_name);
    benchmark::DoNotOptimize(m);
  }
}

// One closed-form 3-D configuration of a transformer (memory and iteration):
// GPT-3 175B on 1,024 A100s, t = 8, p = 16, d = 8.
void BM_TransformerConfiguration(benchmark::State& state) {
  const TransformerConfig& c = find_transformer_config("gpt3-175b", "bench");
  const GpuMachine& machine = find_gpu_machine("dgx-a100", "bench");
  TransformerTraining t;
  t.tensor = 8;
  t.pipeline = 16;
  t.data = 8;
  t.sequence_parallel = true;
  t.recompute = Recompute::selective;
  t.zero_stage = 1;
  if (!(transformer_step(c, t, 1536, machine).iteration_s > 0)) state.SkipWithError("no iteration time");
  for (auto _ : state) {
    benchmark::DoNotOptimize(transformer_memory(c, t).total_bytes());
    benchmark::DoNotOptimize(transformer_step(c, t, 1536, machine).iteration_s);
  }
}

// The 3-D search for GPT-3 175B on 1,024 A100s at 1,536 sequences, its
// best 5 simulated as whole jobs (`trainsim llm --search --simulate 5`).
void BM_TransformerSearch(benchmark::State& state) {
  const TransformerConfig& c = find_transformer_config("gpt3-175b", "bench");
  TransformerSearchOptions o;
  o.gpus = 1024;
  o.global_batch = 1536;
  o.simulate = state.range(0);
  if (search_transformer(c, find_gpu_machine("dgx-a100", "bench"), o).ranked.empty()) state.SkipWithError("none fits");
  for (auto _ : state) {
    benchmark::DoNotOptimize(search_transformer(c, find_gpu_machine("dgx-a100", "bench"), o).fit);
  }
}

// GPT-3 175B's whole job on 1,024 A100s as the search chooses it (t = 4,
// p = 8, d = 32, micro-batches of two, interleaved over four chunks,
// sequence parallelism, FlashAttention, no recomputation, ZeRO-1) as a
// plan, and one iteration of it simulated (`trainsim llm --simulate-job`).
void BM_TransformerJobSimulation(benchmark::State& state) {
  const TransformerConfig& c = find_transformer_config("gpt3-175b", "bench");
  TransformerTraining t;
  t.tensor = 4;
  t.pipeline = 8;
  t.data = 32;
  t.micro_batch = 2;
  t.virtual_stages = 4;
  t.sequence_parallel = true;
  t.flash_attention = true;
  t.zero_stage = 1;
  const GpuMachine& machine = find_gpu_machine("dgx-a100", "bench");
  for (auto _ : state) {
    const TransformerJob job = transformer_job(c, t, 1536, machine, {}, 1);
    benchmark::DoNotOptimize(simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s);
  }
}

BENCHMARK_CAPTURE(BM_PredictAllStrategies, resnet1001_h100x8, std::string("resnet1001"), std::string("h100x8-nvlink"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictAllStrategies, resnet1001_h100x4node, std::string("resnet1001"),
                  std::string("h100x4node-ib400"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictAllStrategies, vgg16_p40x4, std::string("vgg16"), std::string("p40x4-pcie3"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PredictZoo, p40x4_pcie3, std::string("p40x4-pcie3"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_PredictZoo, titanxp_4node_10gbe, std::string("titanxp-4node-10gbe"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_PredictZoo, p100x4_nvlink_power8, std::string("p100x4-nvlink-power8"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_PredictZoo, titanxp_8x6_ib100, std::string("titanxp-8x6-ib100"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_PredictZoo, h100x8_nvlink, std::string("h100x8-nvlink"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_PredictZoo, h100x4node_ib400, std::string("h100x4node-ib400"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_AnalyticProfile, resnet1001, std::string("resnet1001"))->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransformerConfiguration)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_TransformerSearch)->Arg(0)->Arg(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TransformerJobSimulation)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_BuildZooModel, resnet1001, std::string("resnet1001"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainsim

BENCHMARK_MAIN();
