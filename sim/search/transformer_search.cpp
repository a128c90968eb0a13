// The 3-D search for a transformer's training (transformer_search.hpp).
#include "sim/search/transformer_search.hpp"

#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/transformer_plan.hpp"

namespace trainsim {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The candidate's whole job simulated for one iteration (every GPU, its
// tensor-, pipeline- and data-parallel collectives: transformer_plan.hpp);
// where that plan would pass the simulator's op limit (or its GPUs fill no
// whole machines), one pipeline of it, 1f1b or zb-h1 over its stages, plus
// the closed form's data-parallel all-reduce.
double simulated_iteration_s(const TransformerConfig& c, const TransformerCandidate& k, const GpuMachine& machine,
                             const TransformerSearchOptions& o) {
  try {
    const TransformerJob job = transformer_job(c, k.training, o.global_batch, machine, o.assumptions, 1);
    return simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s;
  } catch (const InputError&) {
    // Too large for one plan: its pipeline below.
  }
  const TransformerPipeline pipe = transformer_pipeline(c, k.training, o.global_batch, machine, o.assumptions);
  StrategyConfig config;
  config.set("stages", pipe.stages, "search");
  config.set("microbatches", std::to_string(pipe.microbatches), "search");
  if (pipe.chunks > 1) config.set("chunks", std::to_string(pipe.chunks), "search");
  if (pipe.strategy == "zb-h1") config.set_json("weight_share", pipe.weight_share, "search");
  const Plan plan = generate_plan(find_strategy(pipe.strategy, "search"), pipe.profile, pipe.cluster, config, 3);
  return simulate_plan(plan, pipe.cluster, SimOptions{}).iteration_s + k.step.data_parallel_s;
}

}  // namespace

TransformerSearchResult search_transformer(const TransformerConfig& c, const GpuMachine& machine,
                                           const TransformerSearchOptions& o) {
  if (o.global_batch < 1) throw InputError("--global-batch", std::to_string(o.global_batch), "1 or more sequences");
  const double limit = o.memory_limit_bytes > 0 ? o.memory_limit_bytes : machine.memory_bytes;
  TransformerSearchResult result;
  for (const int64_t tp : {1, 2, 4, 8}) {
    if (tp > machine.gpus || c.heads % tp != 0) continue;
    for (const int64_t pp : divisors(c.layers)) {
      if (o.gpus % (tp * pp) != 0) continue;
      const int64_t dp = o.gpus / (tp * pp);
      for (const int64_t b : {1, 2, 4, 8}) {
        if (o.global_batch % (dp * b) != 0) continue;
        const int64_t m = o.global_batch / (dp * b);
        for (const int64_t v : {1, 2, 4}) {
          if (v > 1 && (pp == 1 || c.layers % (pp * v) != 0 || m % pp != 0)) continue;
          for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
            for (const bool sp : {false, true}) {
              if (sp && tp == 1) continue;
              for (const bool flash : {false, true}) {
                if (flash && r == Recompute::selective) continue;  // FlashAttention keeps no scores to recompute
                for (const int zero : {0, 1, 2, 3}) {
                  if ((zero > 0 && dp == 1) || (zero >= 2 && pp > 1)) continue;
                  TransformerCandidate k;
                  k.training = {tp, pp, dp, b, m, v, sp, r, flash, zero};
                  k.memory = transformer_memory(c, k.training);
                  ++result.evaluated;
                  if (k.memory.total_bytes() > limit) continue;
                  k.step = transformer_step(c, k.training, o.global_batch, machine, o.assumptions);
                  result.ranked.push_back(k);
                  if (pp == 1 || v > 1) continue;
                  k.training.zero_bubble = true;  // ZB-H1: the same memory, its own bubble
                  ++result.evaluated;
                  k.step = transformer_step(c, k.training, o.global_batch, machine, o.assumptions);
                  result.ranked.push_back(k);
                }
              }
            }
          }
        }
      }
    }
  }
  result.fit = static_cast<int64_t>(result.ranked.size());
  const auto faster = [](const TransformerCandidate& a, const TransformerCandidate& b) {
    return a.iteration_s() < b.iteration_s();
  };
  std::stable_sort(result.ranked.begin(), result.ranked.end(), faster);
  const auto simulated = std::min<int64_t>(o.simulate, result.fit);
  for (int64_t i = 0; i < simulated; ++i) {
    TransformerCandidate& k = result.ranked[static_cast<size_t>(i)];
    k.simulated_iteration_s = simulated_iteration_s(c, k, machine, o);
  }
  std::stable_sort(result.ranked.begin(), result.ranked.begin() + simulated, faster);
  return result;
}

}  // namespace trainsim
