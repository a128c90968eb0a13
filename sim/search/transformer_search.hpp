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

}  // namespace trainsim
