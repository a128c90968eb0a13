// The published transformer configurations (transformer_configs.hpp).
#include "model/zoo/transformer_configs.hpp"

#include "model/error.hpp"

namespace trainsim {

const std::vector<TransformerConfig>& transformer_configs() {
  static const std::string megatron = "Narayanan et al. 2021 (Megatron-LM, SC21), Table 1";
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
      {"gpt3-175b", "Brown et al. 2020 (GPT-3), Table 2.1", 96, 12288, 96, 2048, 50257},
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

double transformer_params(const TransformerConfig& c) {
  const auto l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  return 12 * l * h * h + 13 * l * h + static_cast<double>(c.vocab + c.seq) * h;
}

}  // namespace trainsim
