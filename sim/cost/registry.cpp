// The strategy table: ids, settings and cost models of every strategy.
#include "model/error.hpp"
#include "sim/plan/plan.hpp"
#include "model/strings.hpp"
#include "sim/cost/common.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {

const std::vector<StrategyInfo>& strategy_registry() {
  static const std::vector<StrategyInfo> registry = {
      {"single", "one device: forward, backward, update", "baseline", {}, &predict_single, &plan_single},
      {"dp-ps",
       "data parallel, gradients summed at a parameter server",
       "seeds 000, 003, 004",
       {"workers", "server"},
       &predict_dp_ps,
       &plan_dp_ps,
       {{"server", {"device", "host"}}}},
      {"dp-ring",
       "data parallel, one AllReduce of all gradients after backward",
       "seeds 002, 004",
       {"workers", "algorithm"},
       &predict_dp_ring,
       &plan_dp_ring,
       {{"algorithm", {"ring", "recursive-doubling", "rabenseifner", "tree"}}}},
      {"dp-overlap",
       "data parallel, bucketed AllReduce overlapped with backward",
       "common practice",
       {"workers", "algorithm", "bucket_bytes"},
       &predict_dp_overlap,
       &plan_dp_overlap,
       {{"algorithm", {"ring", "recursive-doubling", "rabenseifner", "tree"}}}},
      {"pipesgd",
       "pipelined iterations of width K, ring AllReduce, optional compression",
       "seed 002",
       {"workers", "algorithm", "width", "compression", "segments", "warmup"},
       &predict_pipesgd,
       &plan_pipesgd,
       {{"width", {"1", "2"}}, {"compression", {"none", "trunc16", "quant8"}}}},
      {"cgdp",
       "CPU-GPU data parallel: chunks summed on the host, overlapped with backward",
       "seed 003",
       {"workers", "chunks", "chunk_size"},
       &predict_cgdp,
       &plan_cgdp},
      {"pipedream",
       "pipelined model parallel, 1F1B with weight stashing",
       "seed 000 baseline, PipeDream",
       {"stages", "replicas", "replicate"},
       &predict_pipedream,
       &plan_pipedream,
       {{"replicate", {"true", "false"}}}},
      {"pipedream-sync",
       "1F1B with a global barrier per pipeline time unit",
       "seed 000",
       {"stages", "replicas", "replicate"},
       &predict_pipedream_sync,
       &plan_pipedream_sync,
       {{"replicate", {"false", "true"}}}},
      {"dualpipe",
       "forward and backward issued together per time unit; SpecTrain",
       "seed 000",
       {"stages", "replicas", "replicate", "spectrain"},
       &predict_dualpipe,
       &plan_dualpipe,
       {{"replicate", {"false", "true"}}}},
      {"gpipe",
       "micro-batches, flush per mini-batch, no staleness",
       "seed 001 baseline, GPipe",
       {"stages", "replicas", "replicate", "microbatches"},
       &predict_gpipe,
       &plan_gpipe,
       {{"replicate", {"false", "true"}}, {"microbatches", {"1", "2", "4", "8", "16", "32", "64", "128"}}}},
      {"1f1b",
       "micro-batches one forward, one backward, flush per mini-batch; K - k in flight",
       "PipeDream-Flush (Narayanan et al. 2021), Megatron-LM",
       {"stages", "replicas", "replicate", "microbatches", "chunks"},
       &predict_1f1b,
       &plan_1f1b,
       {{"replicate", {"false", "true"}}, {"microbatches", {"1", "2", "4", "8", "16", "32", "64", "128"}}}},
      {"zb-h1",
       "1F1B with each backward split: input gradients first, weight gradients held back to fill the bubble",
       "zero bubble, ZB-H1 (Qi et al. 2023)",
       {"stages", "microbatches", "weight_share"},
       &predict_zb_h1,
       &plan_zb_h1,
       {{"microbatches", {"1", "2", "4", "8", "16", "32", "64", "128"}}}},
      {"dsp",
       "diversely stale parameters: FIFO-decoupled blocks, overlapped recomputation",
       "seed 001",
       {"stages", "queues"},
       &predict_dsp,
       &plan_dsp},
      {"parallax",
       "dense by AllReduce, sparse by parameter servers with local aggregation",
       "seed 004",
       {"workers", "algorithm", "mode", "local_aggregation"},
       &predict_parallax,
       &plan_parallax,
       {{"mode", {"hybrid", "ps", "ar"}}, {"local_aggregation", {"true", "false"}}}},
  };
  return registry;
}

const StrategyInfo& find_strategy(const std::string& id, const std::string& where) {
  std::vector<std::string> ids;
  for (const StrategyInfo& s : strategy_registry()) {
    if (s.id == id) return s;
    ids.push_back(s.id);
  }
  throw InputError(where, "unknown strategy '" + id + "'", "one of " + join(ids, ", "));
}

Plan generate_plan(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                   StrategyConfig config, int32_t iterations) {
  check_cluster_devices(cluster);
  if (iterations > kMaxPlanIterations) {
    throw InputError("--iterations", "is " + std::to_string(iterations),
                     "at most " + std::to_string(kMaxPlanIterations) + " iterations a plan trains");
  }
  Plan plan = strategy.plan(profile, cluster, config, iterations);
  config.check_all_used(strategy.id);
  plan.strategy = strategy.id;
  plan.config = config.resolved();
  return plan;
}

Prediction predict_strategy(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                            StrategyConfig config) {
  check_cluster_devices(cluster);
  Prediction p = strategy.predict(profile, cluster, config);
  config.check_all_used(strategy.id);
  p.strategy = strategy.id;
  return p;
}

}  // namespace trainsim
