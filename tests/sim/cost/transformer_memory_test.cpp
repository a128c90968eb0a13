// The memory of a transformer's training per device against hand-computed
// cases of the papers' formulas: ZeRO's Figure 1 (Rajbhandari et al. 2020)
// and the activations of Korthikanti et al. 2022's Table 2 for GPT-3 175B.
#include "sim/cost/transformer_memory.hpp"

#include <gtest/gtest.h>

#include "model/error.hpp"

namespace trainsim {
namespace {

const TransformerConfig& gpt3() { return find_transformer_config("gpt3-175b", "model"); }

double total(const ModelStates& m) { return m.weights_bytes + m.gradients_bytes + m.optimizer_bytes; }

// Ψ = 7.5B over 64 data-parallel devices with K = 12: 120 GB, 31.4 GB,
// 16.6 GB and 1.9 GB for stages 0 to 3 (the paper's Figure 1).
TEST(TransformerMemory, ZeroStagesAsTheZeroPapersFigureOne) {
  const double psi = 7.5e9;
  EXPECT_DOUBLE_EQ(total(model_state_bytes(psi, 0, 64, 12)), 120e9);
  EXPECT_DOUBLE_EQ(total(model_state_bytes(psi, 1, 64, 12)), 4 * psi + 12 * psi / 64);  // 31.41 GB
  EXPECT_DOUBLE_EQ(total(model_state_bytes(psi, 2, 64, 12)), 2 * psi + 14 * psi / 64);  // 16.64 GB
  EXPECT_DOUBLE_EQ(total(model_state_bytes(psi, 3, 64, 12)), 16 * psi / 64);            // 1.875 GB
  const ModelStates two = model_state_bytes(psi, 2, 64, 12);
  EXPECT_DOUBLE_EQ(two.weights_bytes, 15e9);
  EXPECT_DOUBLE_EQ(two.gradients_bytes, 2 * psi / 64);
}

// GPT-3 175B (a = 96, s = 2048, h = 12288) at b = 1: s·b·h = 25,165,824 and
// 5·a·s/(h·t) = 10 at t = 8, 80 at t = 1.
TEST(TransformerMemory, ActivationsPerLayerAsKorthikantisTableTwo) {
  const double sbh = 2048.0 * 12288.0;
  TransformerTraining t;
  t.tensor = 1;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 114 * sbh);  // 34 + 5as/h
  t.tensor = 8;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 23 * sbh);  // 10 + 24/8 + 10
  t.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 14.25 * sbh);  // 34/8 + 10
  t.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 4.25 * sbh);  // 34/8
  t.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 13 * sbh);  // 10 + 24/8
  t.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 2 * sbh);
  t.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 2 * sbh / 8);
  t.micro_batch = 4;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 4 * 2 * sbh / 8);
}

// Megatron's 145.6B model (l = 80, h = 12288, a = 96) on t = 8, p = 8, d = 8
// with sequence parallelism, selective recomputation and ZeRO-1, by hand.
TEST(TransformerMemory, TheFirstPipelineStageOfMegatrons145B) {
  const TransformerConfig& c = find_transformer_config("megatron-145.6b", "model");
  TransformerTraining t;
  t.tensor = 8;
  t.pipeline = 8;
  t.data = 8;
  t.sequence_parallel = true;
  t.recompute = Recompute::selective;
  t.zero_stage = 1;
  // 10 blocks of 12·12288²/8 + 7·12288/8 + 6·12288, V·h/8 and s·h.
  const double params = 10 * (226'492'416.0 + 10'752 + 73'728) + 78'643'200 + 25'165'824;
  const TransformerMemory m = transformer_memory(c, t);
  EXPECT_DOUBLE_EQ(m.params, params);
  EXPECT_DOUBLE_EQ(m.weights_bytes, 2 * params);
  EXPECT_DOUBLE_EQ(m.gradients_bytes, 2 * params);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 12 * params / 8);
  const double layer = 4.25 * 2048 * 12288;
  EXPECT_DOUBLE_EQ(m.activations_bytes, 80 * layer);  // 10 layers x 8 micro-batches in flight
  t.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(transformer_memory(c, t).activations_bytes, 80 * layer * (1 + 7.0 / 16));
  t.virtual_stages = 1;
  t.microbatches = 4;  // fewer micro-batches than stages: 4 in flight
  EXPECT_DOUBLE_EQ(transformer_memory(c, t).activations_bytes, 40 * layer);
  EXPECT_DOUBLE_EQ(transformer_memory(c, t).total_bytes(),
                   m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + 40 * layer);
  // ZeRO-3 over 8 without a pipeline: a 1/8 of every state, and two blocks'
  // 16-bit weights gathered whole (the one running, the one prefetched),
  // larger than half the vocabulary's V·h/8 table.
  t.pipeline = 1;
  t.microbatches = 0;
  t.zero_stage = 3;
  const double whole = 80 * (226'492'416.0 + 10'752 + 73'728) + 78'643'200 + 25'165'824;
  const TransformerMemory z = transformer_memory(c, t);
  EXPECT_DOUBLE_EQ(z.weights_bytes, 2 * whole / 8 + 2 * 2 * (226'492'416.0 + 10'752 + 73'728));
  EXPECT_DOUBLE_EQ(z.gradients_bytes, 2 * whole / 8);
  EXPECT_DOUBLE_EQ(z.optimizer_bytes, 12 * whole / 8);
}

// Llama 2 7B at b = 1, t = 1 (s = h = 4096, f = 11008, a = 32): the norms'
// and products' inputs 8·s·h, Q, K, V and the projection's input
// s·(4h + 4h), SwiGLU's 6·s·f, the softmax 2·a·s²; with t = 2 and SP all
// over 2; GQA's 70B keeps K and V of 8 heads of 128.
TEST(TransformerMemory, LlamasBlockByTheSameAccounting) {
  const double s = 4096, h = 4096, f = 11008;
  TransformerTraining t;
  const TransformerConfig& seven = find_transformer_config("llama2-7b", "model");
  EXPECT_DOUBLE_EQ(layer_activation_bytes(seven, t), 8 * s * h + s * 8 * h + 6 * s * f + 2 * 32 * s * s);
  t.tensor = 2;
  t.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(seven, t), (8 * s * h + s * 8 * h + 6 * s * f + 2 * 32 * s * s) / 2);
  TransformerTraining one;
  const double kv = 1024, big_h = 8192, big_f = 28672;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(find_transformer_config("llama2-70b", "model"), one),
                   8 * s * big_h + s * (4 * big_h + 4 * kv) + 6 * s * big_f + 2 * 64 * s * s);
  // Its 8 key-value heads bound the tensor-parallel size.
  TransformerTraining sixteen;
  sixteen.tensor = 16;
  EXPECT_THROW(transformer_memory(find_transformer_config("llama2-70b", "model"), sixteen), InputError);
}

// FlashAttention keeps no scores, only a row's fp32 softmax statistic a
// head: GPT-3 175B at t = 8 keeps s·b·h·(10 + 3) and 4·96·2048/8 bytes.
TEST(TransformerMemory, FlashAttentionKeepsNoScores) {
  TransformerTraining t;
  t.tensor = 8;
  t.flash_attention = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(), t), 13 * 2048.0 * 12288 + 4 * 96 * 2048.0 / 8);
}

TEST(TransformerMemory, SizesThatDoNotDivideAreRefusedNamingTheSetting) {
  const TransformerConfig& c = find_transformer_config("megatron-145.6b", "model");
  const auto error_of = [&c](TransformerTraining t) -> std::string {
    try {
      transformer_memory(c, t);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  TransformerTraining t;
  t.pipeline = 7;
  EXPECT_NE(error_of(t).find("pipeline: 7 stages"), std::string::npos) << error_of(t);
  t = {};
  t.tensor = 5;
  EXPECT_NE(error_of(t).find("tensor: 5 for megatron-145.6b's 96 heads"), std::string::npos) << error_of(t);
  t = {};
  t.zero_stage = 4;
  EXPECT_NE(error_of(t).find("zero_stage"), std::string::npos);
  t = {};
  t.virtual_stages = 2;
  EXPECT_NE(error_of(t).find("virtual_stages: 2 without a pipeline"), std::string::npos) << error_of(t);
  t = {};
  t.micro_batch = 0;
  EXPECT_NE(error_of(t).find("micro_batch"), std::string::npos);
}

}  // namespace
}  // namespace trainsim
