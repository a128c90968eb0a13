// A transformer's whole 3-D parallel training job as a plan the simulator
// runs (docs/equations.md §10): t·p·d GPUs, each a worker, on machines of
// 8 (Megatron-LM's placement: the tensor-parallel rank fastest, then the
// data-parallel one, then the pipeline stage), every op timed as
// transformer_step prices it. Each stage runs 1F1B (or ZB-H1) over its
// micro-batches; after each pass of its layers the tensor-parallel group
// all-reduces (one op standing for the layers' two all-reduces each,
// Op::repeat) over NVLink; activations and their gradients cross to the
// next stage over the NICs, split over the group (Megatron's
// scatter-gather); after the drain every stage's data-parallel group
// all-reduces its gradients, then the optimizer steps and all workers meet
// at a barrier.
#pragma once

#include <cstdint>

#include "model/zoo/transformer_configs.hpp"
#include "profiles/cluster.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

struct TransformerJob {
  Plan plan;
  Cluster cluster;  // machines of `machine.gpus` GPUs, NVLink inside, the GPUs' NICs between
};

// Interleaved over v chunks, device k runs Megatron-LM's interleaved order
// over virtual stages c·p + k. ZeRO-2 and -3 (without a pipeline): each
// pass's reduce-scatters and ZeRO-3's all-gathers as ops beside the
// compute they overlap. InputError naming the setting for what
// transformer_step refuses, and a job of more than one machine's GPUs that
// whole machines do not hold.
TransformerJob transformer_job(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                               const GpuMachine& machine, const StepAssumptions& a, int32_t iterations);

}  // namespace trainsim
