// Memory per device of a transformer language model (model/zoo/
// transformer_configs.hpp) trained with tensor (t), pipeline (p) and data (d)
// parallelism in 16-bit mixed precision, part by part: weights, gradients
// and optimizer states by ZeRO stage (Rajbhandari et al. 2020), and the
// activations of the micro-batches in flight on the first pipeline stage,
// with or without sequence parallelism and recomputation (Korthikanti et
// al. 2022). docs/equations.md §9.
#pragma once

#include <cstdint>

#include "model/zoo/transformer_configs.hpp"

namespace trainsim {

enum class Recompute { none, selective, full };

struct TransformerTraining {
  int64_t tensor = 1, pipeline = 1, data = 1;
  int64_t micro_batch = 1;     // sequences per micro-batch, b
  int64_t microbatches = 0;    // per pipeline flush; 0: at least p (1F1B's first stage holds p in flight)
  int64_t virtual_stages = 1;  // interleaved 1F1B: model chunks per device, v
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  bool flash_attention = false;  // fused attention (Dao et al. 2022): no scores kept, recomputed in the backward
  int zero_stage = 0;                     // 0 to 3, over the data-parallel group
  double optimizer_bytes_per_param = 12;  // K: Adam's fp32 weights, momentum and variance
  bool zero_bubble = false;               // ZB-H1 instead of 1F1B (Qi et al. 2023): the same memory, a smaller bubble
};

struct TransformerMemory {
  double params = 0;  // on the first pipeline stage's device (it holds the embeddings)
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0;
  double total_bytes() const { return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes; }
};

// Parameters a device of the first pipeline stage holds: l/p blocks
// (block_params: GPT's 12h²/t + 7h/t + 6h, Megatron-LM's split of
// 12h² + 13h), the token embedding split over the vocabulary (V·h/t) and
// GPT's position embedding (s·h) or, on a single stage, Llama's output
// layer (V·h/t).
double first_stage_params(const TransformerConfig& c, const TransformerTraining& t);

// Model states of `params` parameters over a data-parallel group of `data`
// (Rajbhandari et al. 2020, §5 and Figure 1): 2Ψ of 16-bit weights, 2Ψ of
// 16-bit gradients, KΨ of optimizer states; ZeRO stage 1 partitions the
// optimizer states over the group, stage 2 the gradients too, stage 3 the
// weights too.
struct ModelStates {
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;
};
ModelStates model_state_bytes(double params, int zero_stage, int64_t data, double optimizer_bytes_per_param);

// Activation bytes one transformer layer keeps for its backward per
// micro-batch (Korthikanti et al. 2022, Table 2), a = heads; for GPT:
//   none:      s·b·h·(10 + 24/t + 5·a·s/(h·t));  with sequence parallelism s·b·h·(34/t + 5·a·s/(h·t))
//   selective: the attention's 5·a·s/(h·t) recomputed: s·b·h·(10 + 24/t), with SP s·b·h·34/t
//   full:      the layer's input alone: 2·s·b·h, with SP 2·s·b·h/t
// and by the same accounting for Llama's block (no dropout, SwiGLU, GQA):
// s·b·(8h + (4h + 4h_kv + 6f)/t) + 2·a·s²·b/t [derived]. FlashAttention
// keeps no s² term, only each row's softmax statistic in fp32, 4·a·s·b/t
// (Dao et al. 2022 §3.1).
double layer_activation_bytes(const TransformerConfig& c, const TransformerTraining& t);

// The first pipeline stage's memory: its parameters' model states (ZeRO-3:
// and the weights gathered whole for two layers, the one running and the
// one prefetched, or for the vocabulary's table if that is larger), and the
// activations of its l/p layers for every micro-batch in flight: 1F1B keeps
// min(p, m) micro-batches, so l/p layers × p = l layers' worth
// (Korthikanti et al. §4.2.3); interleaved 1F1B with v chunks
// l·(1 + (p − 1)/(p·v)) layers' worth. The embeddings' and the output
// layer's own activations are left out. InputError naming the setting for
// sizes below 1, layers that p or heads that t do not divide, a ZeRO stage
// outside 0-3 or interleaving without a pipeline.
TransformerMemory transformer_memory(const TransformerConfig& c, const TransformerTraining& t);

}  // namespace trainsim
