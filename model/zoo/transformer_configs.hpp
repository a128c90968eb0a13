// Decoder-only transformer language models by their configuration: layers,
// hidden size, heads, sequence length and vocabulary, as the papers that
// trained them publish them, and the block's form: GPT-2/3 and Megatron-LM
// (learned position embeddings, biases, two layer norms a block, a 4h GELU
// MLP, dropout, the output layer tied to the token embedding) or Llama 2
// (rotary positions, no biases, RMSNorm, a SwiGLU MLP, grouped-query
// attention, no dropout, an output layer of its own). The numbers the LLM
// cost models (sim/cost/transformer_memory.*, transformer_step.*) read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainsim {

struct TransformerConfig {
  std::string name;    // e.g. "megatron-145.6b"
  std::string source;  // the table the numbers come from
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  int64_t ffn = 0;       // the MLP's width; 0: 4·hidden
  int64_t kv_heads = 0;  // key and value heads (grouped-query attention); 0: heads
  bool llama = false;    // Llama 2's block (above) instead of GPT's

  int64_t ffn_width() const { return ffn > 0 ? ffn : 4 * hidden; }
  int64_t kv_width() const { return hidden / heads * (kv_heads > 0 ? kv_heads : heads); }
};

// Megatron-LM's Table 1 (Narayanan et al., SC21: 1.7B to 1T, vocabulary
// 51,200, sequence 2,048), GPT-3 175B (Brown et al. 2020, Table 2.1) and
// Llama 2 7B, 13B and 70B (Touvron et al. 2023, Table 1 and Meta's released
// configurations: sequence 4,096, vocabulary 32,000, GQA with 8 key-value
// heads for 70B).
const std::vector<TransformerConfig>& transformer_configs();

// The configuration called `name`; InputError naming `flag` and listing them otherwise.
const TransformerConfig& find_transformer_config(const std::string& name, const std::string& flag);

// Every parameter: each block's attention (2h² + 2h·h_kv), MLP (2h·f, or
// 3h·f gated), biases and norms, the embeddings, the final norm and an
// untied output layer. GPT's is 12·l·h² + 13·l·h + (V + s)·h + 2h
// (Narayanan et al. 2021 §5.1 leaves out the final layer norm's 2h).
double transformer_params(const TransformerConfig& c);

// One block's parameters on a GPU of a t-way tensor-parallel group: its
// matrices and the QKV and first MLP biases split over t, the output biases
// and norms replicated (Megatron-LM's split).
double block_params(const TransformerConfig& c, int64_t tensor);

}  // namespace trainsim
