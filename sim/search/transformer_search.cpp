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
    k.simulated_iteration_s = simulate_transformer(c, k.training, o.global_batch, machine, o.assumptions).iteration_s;
  }
  std::stable_sort(result.ranked.begin(), result.ranked.begin() + simulated, faster);
  return result;
}

TransformerSimulation simulate_transformer(const TransformerConfig& c, const TransformerTraining& t,
                                           int64_t global_batch, const GpuMachine& machine, const StepAssumptions& a) {
  try {
    const TransformerJob job = transformer_job(c, t, global_batch, machine, a, /*iterations=*/1);
    return {simulate_plan(job.plan, job.cluster, SimOptions{}).iteration_s, true,
            static_cast<int64_t>(job.plan.ops.size())};
  } catch (const InputError&) {
    // Too large for one plan: its pipeline below.
  }
  const TransformerPipeline pipe = transformer_pipeline(c, t, global_batch, machine, a);
  const Plan plan = transformer_pipeline_plan(pipe, 3);
  const double data_parallel_s = transformer_step(c, t, global_batch, machine, a).data_parallel_s;
  return {simulate_plan(plan, pipe.cluster, SimOptions{}).iteration_s + data_parallel_s, false,
          static_cast<int64_t>(plan.ops.size())};
}

Plan transformer_pipeline_plan(const TransformerPipeline& pipe, int32_t iterations) {
  StrategyConfig config;
  config.set("stages", pipe.stages, "transformer pipeline");
  config.set("microbatches", std::to_string(pipe.microbatches), "transformer pipeline");
  if (pipe.chunks > 1) config.set("chunks", std::to_string(pipe.chunks), "transformer pipeline");
  if (pipe.strategy == "zb-h1") config.set_json("weight_share", pipe.weight_share, "transformer pipeline");
  return generate_plan(find_strategy(pipe.strategy, "transformer pipeline"), pipe.profile, pipe.cluster, config,
                       iterations);
}

std::string transformer_family(const TransformerTraining& t) {
  if (t.pipeline > 1) return t.zero_bubble ? "zb-h1" : t.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
  if (t.tensor > 1) return "tensor-parallel";
  return t.zero_stage == 0 ? "data-parallel" : "zero-" + std::to_string(t.zero_stage);
}

const std::vector<std::string>& transformer_families() {
  static const std::vector<std::string> families = {"data-parallel",   "zero-1", "zero-2",           "zero-3",
                                                    "tensor-parallel", "1f1b",   "interleaved-1f1b", "zb-h1"};
  return families;
}

std::vector<TransformerCandidate> fastest_per_family(const std::vector<TransformerCandidate>& ranked) {
  std::vector<TransformerCandidate> out;
  for (const std::string& family : transformer_families()) {
    const auto first = std::find_if(ranked.begin(), ranked.end(), [&family](const TransformerCandidate& k) {
      return transformer_family(k.training) == family;
    });
    if (first != ranked.end()) out.push_back(*first);
  }
  return out;
}

}  // namespace trainsim
