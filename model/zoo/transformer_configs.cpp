// The published transformer configurations (transformer_configs.hpp).
#include "model/zoo/transformer_configs.hpp"

#include "model/error.hpp"

namespace trainsim {

const std::vector<TransformerConfig>& transformer_configs() {
  static const std::string megatron = "Narayanan et al. 2021 (Megatron-LM, SC21), Table 1";
  static const std::string korthikanti = "Korthikanti et al. 2022 (reducing activation recomputation), Table 3";
  static const std::string llama = "Touvron et al. 2023 (Llama 2), Table 1; Meta's released configuration";
  static const std::vector<TransformerConfig> configs = {
      {"megatron-1.7b", megatron, 24, 2304, 24, 2048, 51200},
      {"megatron-3.6b", megatron, 30, 3072, 32, 2048, 51200},
      {"megatron-7.5b", megatron, 36, 4096, 32, 2048, 51200},
      {"megatron-18.4b", megatron, 40, 6144, 48, 2048, 51200},
      {"megatron-39.1b", megatron, 48, 8192, 64, 2048, 51200},
      {"megatron-76.1b", megatron, 60, 10240, 80, 2048, 51200},
      {"megatron-145.6b", megatron, 80, 12288, 96, 2048, 51200},
      {"megatron-310.1b", megatron, 96, 16384, 128, 2048, 51200},
      {"megatron-529.6b", megatron, 105, 20480, 128, 2048, 51200},
      {"megatron-1008b", megatron, 128, 25600, 160, 2048, 51200},
      {"megatron-22b", korthikanti, 48, 6144, 64, 2048, 51200},
      {"megatron-175b", korthikanti, 96, 12288, 96, 2048, 51200},
      {"gpt3-175b", "Brown et al. 2020 (GPT-3), Table 2.1", 96, 12288, 96, 2048, 50257},
      {"llama2-7b", llama, 32, 4096, 32, 4096, 32000, 11008, 0, true},
      {"llama2-13b", llama, 40, 5120, 40, 4096, 32000, 13824, 0, true},
      {"llama2-70b", llama, 80, 8192, 64, 4096, 32000, 28672, 8, true},
  };
  return configs;
}

const TransformerConfig& find_transformer_config(const std::string& name, const std::string& flag) {
  std::string known;
  for (const TransformerConfig& c : transformer_configs()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  throw InputError(flag, "'" + name + "' is not a transformer configuration", "one of " + known);
}

double block_params(const TransformerConfig& c, int64_t tensor) {
  const auto h = static_cast<double>(c.hidden), kv = static_cast<double>(c.kv_width());
  const auto f = static_cast<double>(c.ffn_width()), t = static_cast<double>(tensor);
  const double matrices = 2 * h * h + 2 * h * kv + (c.llama ? 3 : 2) * h * f;
  const double split_biases = c.llama ? 0 : h + 2 * kv + f;                     // QKV's and the first MLP matrix's
  const double replicated = (c.llama ? 0 : 2 * h) + (c.llama ? 2 * h : 4 * h);  // output biases; two norms
  return (matrices + split_biases) / t + replicated;
}

double transformer_params(const TransformerConfig& c) {
  const auto h = static_cast<double>(c.hidden), v = static_cast<double>(c.vocab);
  const double embeddings = v * h + (c.llama ? v * h : static_cast<double>(c.seq) * h);  // output / positions
  const double final_norm = c.llama ? h : 2 * h;
  return static_cast<double>(c.layers) * block_params(c, 1) + embeddings + final_norm;
}

}  // namespace trainsim
