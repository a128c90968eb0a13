// Decoder-only (GPT) transformer language models by their configuration:
// layers, hidden size, heads, sequence length and vocabulary, as the papers
// that trained them publish them. The numbers the LLM cost models
// (sim/cost/transformer_memory.*) read; learned position embeddings, biases,
// two layer norms a block, a 4h MLP and the output layer tied to the token
// embedding, as GPT-2/3 and Megatron-LM build them.
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
};

// Megatron-LM's Table 1 (Narayanan et al., SC21: 1.7B to 1T, vocabulary
// 51,200, sequence 2,048) and GPT-3 175B (Brown et al. 2020, Table 2.1).
const std::vector<TransformerConfig>& transformer_configs();

// The configuration called `name`; InputError naming `flag` and listing them otherwise.
const TransformerConfig& find_transformer_config(const std::string& name, const std::string& flag);

// P = 12·l·h² + 13·l·h + (V + s)·h: every block's QKV, output and two MLP
// matrices with their biases and two layer norms, the token and position
// embeddings (Narayanan et al. 2021 §5.1, the output layer tied).
double transformer_params(const TransformerConfig& c);

}  // namespace trainsim
