// The published transformer configurations: each one's parameter count by
// 12·l·h² + 13·l·h + (V + s)·h rounds to the figure its paper prints.
#include "model/zoo/transformer_configs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/error.hpp"

namespace trainsim {
namespace {

// Narayanan et al. 2021, Table 1, "Number of parameters (billion)"; Brown et al. 2020, Table 2.1.
const std::map<std::string, double> kPublishedBillions = {
    {"megatron-1.7b", 1.7},     {"megatron-3.6b", 3.6},    {"megatron-7.5b", 7.5},     {"megatron-18.4b", 18.4},
    {"megatron-39.1b", 39.1},   {"megatron-76.1b", 76.1},  {"megatron-145.6b", 145.6}, {"megatron-310.1b", 310.1},
    {"megatron-529.6b", 529.6}, {"megatron-1008b", 1008.0}};

TEST(TransformerConfigs, MegatronsTableOneParameterCountsComeOutOfTheFormula) {
  for (const auto& [name, billions] : kPublishedBillions) {
    const double p = transformer_params(find_transformer_config(name, "--model"));
    EXPECT_DOUBLE_EQ(std::round(p / 1e8) / 10, billions) << name << ": " << p;
  }
}

// Korthikanti et al. 2022, Table 3: the 22B and 175B models (the 530B and
// 1T ones are Table 1's 529.6B and 1008B above).
TEST(TransformerConfigs, KorthikantisModelsAreTheirTableThreeSizes) {
  EXPECT_NEAR(transformer_params(find_transformer_config("megatron-22b", "--model")) / 22e9, 1.0, 0.01);
  EXPECT_NEAR(transformer_params(find_transformer_config("megatron-175b", "--model")) / 175e9, 1.0, 0.01);
}

TEST(TransformerConfigs, Gpt3IsHundredSeventyFiveBillion) {
  // 12·96·12288² + 13·96·12288 + (50257 + 2048)·12288 and the final layer norm's 2·12288, by hand.
  const TransformerConfig& c = find_transformer_config("gpt3-175b", "--model");
  EXPECT_DOUBLE_EQ(transformer_params(c), 173'946'175'488.0 + 15'335'424.0 + 642'723'840.0 + 24'576.0);
  EXPECT_NEAR(transformer_params(c) / 175e9, 1.0, 0.003);
}

// Llama 2's parameter counts as Meta's released checkpoints hold them: 7B
// 32 × (4·4096² + 3·4096·11008 + 2·4096) + 2·32000·4096 + 4096, and so on;
// 70B's attention with 8 key-value heads of 128: 2·8192² + 2·8192·1024.
TEST(TransformerConfigs, LlamaTwosParameterCountsByHand) {
  EXPECT_DOUBLE_EQ(transformer_params(find_transformer_config("llama2-7b", "--model")), 6'738'415'616.0);
  EXPECT_DOUBLE_EQ(transformer_params(find_transformer_config("llama2-13b", "--model")), 13'015'864'320.0);
  EXPECT_DOUBLE_EQ(transformer_params(find_transformer_config("llama2-70b", "--model")), 68'976'648'192.0);
  // A block on a GPU of 8: its matrices over 8, its two RMSNorms whole.
  const TransformerConfig& big = find_transformer_config("llama2-70b", "--model");
  EXPECT_DOUBLE_EQ(block_params(big, 8), (2.0 * 8192 * 8192 + 2.0 * 8192 * 1024 + 3.0 * 8192 * 28672) / 8 + 2 * 8192);
}

TEST(TransformerConfigs, AnUnknownNameIsRefusedListingTheKnownOnes) {
  try {
    find_transformer_config("gpt5", "--model");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--model: 'gpt5' is not a transformer configuration"), std::string::npos) << what;
    EXPECT_NE(what.find("megatron-1.7b"), std::string::npos) << what;
    EXPECT_NE(what.find("gpt3-175b"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace trainsim
