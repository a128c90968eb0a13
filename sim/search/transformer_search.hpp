// The 3-D search for a transformer's training (docs/equations.md §10): every
// tensor-parallel size (inside a machine, dividing the heads), pipeline
// depth (dividing the layers), data-parallel size filling the GPUs,
// micro-batch, interleaving, recomputation, sequence parallelism and ZeRO
// stage, priced in closed form, those that fit a GPU's memory ranked by
// their iteration; the best few then simulated, each as its whole job
// (transformer_job; one pipeline of it, transformer_pipeline, where that
// plan would be too large) and ranked again by the simulated iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/transformer_memory.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

struct TransformerSearchOptions {
  int64_t gpus = 8;
  int64_t global_batch = 1;
  double memory_limit_bytes = 0;  // 0: the machine's HBM
  int64_t simulate = 0;           // the best this many, simulated
  StepAssumptions assumptions;
};

struct TransformerCandidate {
  TransformerTraining training;
  TransformerMemory memory;
  TransformerStep step;
  double simulated_iteration_s = 0;  // 0: not simulated
  double iteration_s() const { return simulated_iteration_s > 0 ? simulated_iteration_s : step.iteration_s; }
};

struct TransformerSearchResult {
  int64_t evaluated = 0;                     // configurations priced
  int64_t fit = 0;                           // of which within the memory limit
  std::vector<TransformerCandidate> ranked;  // those that fit, fastest first
};

// InputError naming --global-batch for a batch below 1; where nothing fits,
// an empty ranking.
TransformerSearchResult search_transformer(const TransformerConfig& c, const GpuMachine& machine,
                                           const TransformerSearchOptions& options);

// One configuration simulated for one iteration: its whole job (every GPU,
// its tensor-, pipeline- and data-parallel collectives: transformer_plan.hpp)
// or, where that plan would pass the simulator's op limit (or its GPUs fill
// no whole machines), one pipeline of it, 1f1b or zb-h1 over its stages,
// plus the closed form's data-parallel step after the drain.
struct TransformerSimulation {
  double iteration_s = 0;
  bool whole_job = false;  // else one pipeline
  int64_t ops = 0;         // in the simulated plan
};
TransformerSimulation simulate_transformer(const TransformerConfig& c, const TransformerTraining& t,
                                           int64_t global_batch, const GpuMachine& machine,
                                           const StepAssumptions& a = {});

// One pipeline of a training (transformer_pipeline) as its 1f1b or zb-h1
// plan over `iterations` mini-batches.
Plan transformer_pipeline_plan(const TransformerPipeline& pipe, int32_t iterations);

// The way a configuration spreads the training, as `trainsim predict` and
// `report` group them: a pipeline by its schedule ("1f1b",
// "interleaved-1f1b", "zb-h1"), else tensor parallelism ("tensor-parallel",
// data-parallel beside it), else data parallelism by ZeRO stage
// ("data-parallel", "zero-1", "zero-2", "zero-3").
std::string transformer_family(const TransformerTraining& t);
// Every family, in that order.
const std::vector<std::string>& transformer_families();
// The first of each family in `ranked` (fastest first), in
// transformer_families()'s order; a family none of whose configurations is
// in `ranked` is left out.
std::vector<TransformerCandidate> fastest_per_family(const std::vector<TransformerCandidate>& ranked);

}  // namespace trainsim
