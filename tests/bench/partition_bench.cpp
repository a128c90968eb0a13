// The partition search's speed over model size and worker count: ResNet-50,
// ResNet-1001 (3,338 layers) and a 10,000-layer chain, on 8 to 64 workers of
// one machine, with replication (goal: ResNet-1001 over 64 workers well under
// a second) and in straight mode with one stage per worker; ResNet-1001 on 8
// machines × 8 devices with the hierarchical search (goal: well under a
// second); GPipe with a free stage count K (measured: see BM_GPipeFreeStages).
#include <benchmark/benchmark.h>

#include <string>

#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/search/partition.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim {
namespace {

using testing_fixtures::simple_cluster;

Profile bench_profile(int64_t which, const Cluster& cluster) {
  if (which == 0) return analytic_profile(build_zoo_model("resnet50"), 32, cluster);
  if (which == 1) return analytic_profile(build_zoo_model("resnet1001"), 64, cluster);
  return testing_fixtures::chain_profile(10000, 1e-4, 2e-4, 1e5, 1e6);
}

// Arguments: profile (0 resnet50, 1 resnet1001, 2 chain of 10,000), workers, straight (0/1).
void BM_SearchPartition(benchmark::State& state) {
  const Cluster cluster = simple_cluster(1, state.range(1));
  const Profile profile = bench_profile(state.range(0), cluster);
  PartitionOptions options;
  options.memory_limit_bytes = -1;  // the search alone; memory limits are timed by their tests
  if (state.range(2) == 1) options.stages = state.range(1);
  for (auto _ : state) {
    Partition p = search_partition(profile, cluster, options);
    benchmark::DoNotOptimize(p.bottleneck_s);
  }
  state.SetLabel(profile.model + ", " + std::to_string(profile.layers.size()) + " layers");
}
BENCHMARK(BM_SearchPartition)
    ->ArgsProduct({{0, 1, 2}, {8, 64}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// PipeDream's two levels: ResNet-1001 on `machines` × 8 devices
// (simple_cluster: 10 GB/s inside a machine, 1 GB/s between).
void BM_HierarchicalPartition(benchmark::State& state) {
  const Cluster cluster = simple_cluster(state.range(0), 8);
  const Profile profile = bench_profile(1, cluster);
  PartitionOptions options;
  options.memory_limit_bytes = -1;
  for (auto _ : state) {
    Partition p = search_partition(profile, cluster, options);
    benchmark::DoNotOptimize(p.bottleneck_s);
  }
  state.SetLabel(std::to_string(state.range(0)) + " machines x 8 devices, " +
                 std::to_string(profile.layers.size()) + " layers");
}
BENCHMARK(BM_HierarchicalPartition)->Arg(2)->Arg(8)->Unit(benchmark::kMillisecond);

// GPipe with a free K: one bisection per K <= min(N, workers), each relaxing
// K levels, O(K_max²·N·M·log(1/ε)) with K_max = M: cubic in the workers.
// Measured (Release, shared 2-core machine): ResNet-1001 35 ms / 216 ms /
// 1.7 s on 4 / 8 / 16 workers (×6 then ×8 per doubling), ResNet-50 1.8 / 12 /
// 90 ms. Hierarchical ResNet-1001 on 8 × 8: 145 ms. Arguments: profile, workers.
void BM_GPipeFreeStages(benchmark::State& state) {
  const Cluster cluster = simple_cluster(1, state.range(1));
  const Profile profile = bench_profile(state.range(0), cluster);
  PartitionOptions options;
  options.objective = PartitionObjective::kGPipe;
  options.memory_limit_bytes = -1;
  for (auto _ : state) {
    Partition p = search_partition(profile, cluster, options);
    benchmark::DoNotOptimize(p.bottleneck_s);
  }
  state.SetLabel(profile.model + ", " + std::to_string(profile.layers.size()) + " layers");
}
BENCHMARK(BM_GPipeFreeStages)
    ->ArgsProduct({{0, 1}, {4, 8, 16}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainsim

BENCHMARK_MAIN();
