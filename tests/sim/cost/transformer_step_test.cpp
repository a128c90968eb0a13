// The closed-form iteration of a transformer's 3-D parallel training,
// priced by hand from docs/equations.md §10's equations.
#include "sim/cost/transformer_step.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/error.hpp"

namespace trainsim {
namespace {

const GpuMachine& a100() { return find_gpu_machine("dgx-a100", "machine"); }

// A product's time by hand: C in 256×128 tiles, 108 SMs, each tile at 80%
// of an SM's share of 312 TFLOP/s, never faster than its HBM bytes.
TEST(TransformerStep, AProductPaysForWholeTilesAndWholeWaves) {
  const double rate = 312e12 * 0.8;
  // 2048 × 6912: 8 × 54 = 432 tiles, four whole waves of 108: its FLOPs at the rate.
  EXPECT_DOUBLE_EQ(gemm_s(2048, 6912, 2304, 1, a100(), {}), 2 * 2048.0 * 6912 * 2304 / rate);
  // 2048 × 9216: 576 tiles, a sixth wave of 36 tiles on 108 SMs: 648 tiles' time.
  EXPECT_DOUBLE_EQ(gemm_s(2048, 9216, 2304, 1, a100(), {}), 648.0 / 576 * 2 * 2048.0 * 9216 * 2304 / rate);
  // 24 products 2048 × 96 (attention's weighted values, heads of 96): a
  // 128-wide tile for 96 columns, 192 tiles in two waves of 108: 216 tiles
  // of 256 × 128 for 24 · 2048 · 96 outputs, 1.5 times their FLOPs' time.
  EXPECT_DOUBLE_EQ(gemm_s(2048, 96, 2048, 24, a100(), {}), 1.5 * 24 * 2 * 2048.0 * 96 * 2048 / rate);
  // 24 products 2048 × 2048 over k = 96 (the scores): 3072 tiles in 29 waves
  // take 79 µs, reading Q and K and writing S takes longer.
  EXPECT_DOUBLE_EQ(gemm_s(2048, 2048, 96, 24, a100(), {}), 2 * 24 * (2 * 2048.0 * 96 + 2048.0 * 2048) / 2039e9);
}

// Megatron's 1.7B (l = 24, h = 2304, a = 24, s = 2048, V = 51200) on t = 1,
// p = 1, d = 32, b = 1, B = 512 with full recomputation: its products
// (AProductPaysForWholeTilesAndWholeWaves prices them) and twice the
// s·b·h·(34 + 5as/h) bytes the layer keeps; NCCL at 80% of the links.
TEST(TransformerStep, Megatrons17BOnFourDgxA100ByHand) {
  TransformerTraining t;
  t.data = 32;
  t.recompute = Recompute::full;
  const TransformerStep r = transformer_step(find_transformer_config("megatron-1.7b", "model"), t, 512, a100());
  const double s = 2048, h = 2304;
  const auto product = [](double m, double n, double k, double batch) { return gemm_s(m, n, k, batch, a100(), {}); };
  // Q, K and V; scores and weighted values over 24 heads of 96; output projection; MLP up and down.
  const double products = product(s, 3 * h, h, 1) + product(s, s, 96, 24) + product(s, 96, s, 24) +
                          product(s, h, h, 1) + product(s, 4 * h, h, 1) + product(s, h, 4 * h, 1);
  const double forward = products + 2 * s * h * (34 + 5.0 * 24 * s / h) / 2039e9;
  EXPECT_DOUBLE_EQ(r.layer_forward_s, forward);
  EXPECT_DOUBLE_EQ(r.layer_tp_comm_s, 0);
  const double output = 3 * product(s, 51200, h, 1);  // the logits' forward and backward
  EXPECT_DOUBLE_EQ(r.output_layer_s, output);
  EXPECT_DOUBLE_EQ(r.microbatch_s, 24 * 4 * forward + output);  // forward, recomputed forward, backward twice
  EXPECT_EQ(r.microbatches, 16);
  EXPECT_DOUBLE_EQ(r.bubble_s, 0);
  EXPECT_DOUBLE_EQ(r.pipeline_s, 16 * r.microbatch_s);
  // P = 1,652,226,048 16-bit gradients over 32 GPUs, 8 a machine sharing its 8 × 25 GB/s at 80%.
  const double params = 1'652'226'048.0;
  EXPECT_DOUBLE_EQ(r.data_parallel_s, 2 * 31.0 / 32 * 2 * params / 160e9 + 2 * 31 * 5e-6);
  EXPECT_DOUBLE_EQ(r.optimizer_s, 28 * params / 2039e9);
  EXPECT_DOUBLE_EQ(r.iteration_s, r.pipeline_s + r.data_parallel_s + r.optimizer_s);
  const double flops = 96 * 512 * s * 24 * h * h * (1 + s / (6 * h) + 51200 / (16 * 24 * h));
  EXPECT_DOUBLE_EQ(r.model_flops, flops);
  EXPECT_DOUBLE_EQ(r.flops_per_gpu_per_s, flops / (r.iteration_s * 32));
  EXPECT_NEAR(r.iteration_s, 3.5085, 1e-3);
}

// Tensor and pipeline parallelism: the all-reduces of b·s·h 16-bit values
// over NVLink (300 GB/s, NCCL at 80% of it), the boundary's values over t
// to the next stage over a 25 GB/s NIC (80%), 1F1B's bubble and
// interleaving's.
TEST(TransformerStep, TensorAndPipelineParallelismByHand) {
  const TransformerConfig& c = find_transformer_config("megatron-145.6b", "model");
  TransformerTraining t;
  t.tensor = 8;
  t.pipeline = 8;
  t.data = 24;
  t.recompute = Recompute::full;
  const TransformerStep r = transformer_step(c, t, 2304, a100());
  const double s = 2048, h = 12288, bytes = 2 * s * h;
  const double all_reduce = 2 * 7.0 / 8 * bytes / 240e9 + 2 * 7 * 5e-6;
  EXPECT_DOUBLE_EQ(r.layer_tp_comm_s, 2 * all_reduce);
  const double p2p = 2 * (bytes / 8 / 20e9 + 5e-6);
  EXPECT_DOUBLE_EQ(r.output_layer_s, 3 * gemm_s(s, 51200.0 / 8, h, 1, a100(), {}));
  EXPECT_DOUBLE_EQ(r.microbatch_s, 10 * (4 * r.layer_forward_s + 3 * r.layer_tp_comm_s) + r.output_layer_s + p2p);
  EXPECT_EQ(r.microbatches, 96);
  // The bubble: the seven stages before the last (10 layers, no output
  // layer) forward the first micro-batch and backward the last.
  const double other_stage = 10 * (4 * r.layer_forward_s + 3 * r.layer_tp_comm_s) + p2p;
  EXPECT_DOUBLE_EQ(r.bubble_s, 7 * other_stage);
  EXPECT_DOUBLE_EQ(r.pipeline_s, 96 * r.microbatch_s + 7 * other_stage);
  // One GPU a machine of each data-parallel group: its own NIC.
  const double params = first_stage_params(c, t);
  EXPECT_DOUBLE_EQ(r.data_parallel_s, 2 * 23.0 / 24 * 2 * params / 20e9 + 2 * 23 * 5e-6);
  t.virtual_stages = 2;
  const TransformerStep v = transformer_step(c, t, 2304, a100());
  EXPECT_DOUBLE_EQ(v.microbatch_s, 10 * (4 * r.layer_forward_s + 3 * r.layer_tp_comm_s) + r.output_layer_s + 2 * p2p);
  EXPECT_DOUBLE_EQ(v.bubble_s, 7.0 / 2 * (10 * (4 * r.layer_forward_s + 3 * r.layer_tp_comm_s) + 2 * p2p));
  // Without recomputation: one all-reduce pair fewer, and three passes of the
  // layers in eq. 3 (the output layer's three unchanged).
  t.virtual_stages = 1;
  t.recompute = Recompute::none;
  const TransformerStep none = transformer_step(c, t, 2304, a100());
  EXPECT_DOUBLE_EQ(none.microbatch_s,
                   10 * (3 * none.layer_forward_s + 2 * none.layer_tp_comm_s) + none.output_layer_s + p2p);
  const double layers = 2304 * s * 80 * (24 * h * h + 4 * s * h), output = 6 * 2304 * s * h * 51200;
  EXPECT_DOUBLE_EQ(r.model_flops, 4 * layers + output);
  EXPECT_DOUBLE_EQ(none.model_flops, 3 * layers + output);
}

// ZB-H1 on Megatron's 145.6B (t = p = 8, full recomputation): a layer's
// weight gradients are its four weight products' size again, the rest of
// its backward (the recomputed forward, the input gradients, the
// all-reduces) its input gradient; the bubble is 7·max(F + B − W, F, B) of
// the last stage's micro-batch, where 1F1B's is 7 of them.
TEST(TransformerStep, ZeroBubbleHoldsTheWeightGradientsBackToShrinkTheBubble) {
  const TransformerConfig& c = find_transformer_config("megatron-145.6b", "model");
  TransformerTraining t;
  t.tensor = 8;
  t.pipeline = 8;
  t.data = 24;
  t.recompute = Recompute::full;
  const TransformerStep one = transformer_step(c, t, 2304, a100());
  t.zero_bubble = true;
  const TransformerStep zb = transformer_step(c, t, 2304, a100());
  const double s = 2048, h = 12288;
  const auto product = [](double m, double n, double k) { return gemm_s(m, n, k, 1, a100(), {}); };
  const double weights =
      product(s, 3 * h / 8, h) + product(s, h, h / 8) + product(s, 4 * h / 8, h) + product(s, h, h / 2);
  const double backward = 3 * one.layer_forward_s + 2 * one.layer_tp_comm_s;  // recomputed forward, twice its time
  EXPECT_DOUBLE_EQ(zb.weight_share, weights / backward);
  const double forward = 10 * (one.layer_forward_s + one.layer_tp_comm_s) + one.output_layer_s / 3;
  const double w = 10 * weights + one.output_layer_s / 3;
  const double p2p = 2 * (2 * s * h / 8 / 20e9 + 5e-6);
  const double b = one.microbatch_s - p2p - forward - w;
  EXPECT_DOUBLE_EQ(zb.microbatch_s, one.microbatch_s);
  EXPECT_NEAR(zb.bubble_s, 7 * std::max({forward + b - w, forward, b}), 1e-12);
  EXPECT_LT(zb.bubble_s, one.bubble_s);
  EXPECT_DOUBLE_EQ(zb.iteration_s - zb.bubble_s, one.iteration_s - one.bubble_s);
  t.virtual_stages = 2;
  EXPECT_THROW(transformer_step(c, t, 2304, a100()), InputError);  // no interleaved ZB-H1
}

// FlashAttention: the forward's elementwise bytes lose the scores, and the
// backward recomputes S = QKᵀ where nothing else is: half the attention's
// two products.
TEST(TransformerStep, FlashAttentionRecomputesTheScoresInItsBackward) {
  const TransformerConfig& c = find_transformer_config("megatron-1.7b", "model");
  TransformerTraining t;
  t.data = 32;
  const TransformerStep plain = transformer_step(c, t, 512, a100());
  t.flash_attention = true;
  const TransformerStep r = transformer_step(c, t, 512, a100());
  const double s = 2048;
  const double attention = gemm_s(s, s, 96, 24, a100(), {}) + gemm_s(s, 96, s, 24, a100(), {});
  // The scores' 5as²b bytes no longer read and written, each row's statistic (4·a·s) instead.
  const double elementwise_saved = 2 * (5 * 24 * s * s - 4 * 24 * s) / 2039e9;
  EXPECT_DOUBLE_EQ(r.layer_forward_s, plain.layer_forward_s - elementwise_saved);
  EXPECT_DOUBLE_EQ(r.microbatch_s, 24 * (3 * r.layer_forward_s + attention / 2) + r.output_layer_s);
}

TEST(TransformerStep, WhatItCannotPriceIsRefusedNamingTheSetting) {
  const TransformerConfig& c = find_transformer_config("megatron-145.6b", "model");
  const auto error_of = [&c](TransformerTraining t, int64_t batch) -> std::string {
    try {
      transformer_step(c, t, batch, a100());
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  TransformerTraining t;
  t.data = 24;
  EXPECT_NE(error_of(t, 100).find("global_batch: 100"), std::string::npos) << error_of(t, 100);
  t.tensor = 16;
  EXPECT_NE(error_of(t, 2304).find("tensor: 16 GPUs, more than a dgx-a100 machine's 8"), std::string::npos)
      << error_of(t, 2304);
  t.tensor = 8;
  t.pipeline = 2;
  t.zero_stage = 3;
  EXPECT_NE(error_of(t, 2304).find("zero_stage: 3 with 2 pipeline stages"), std::string::npos) << error_of(t, 2304);
}

// ZeRO-2 and -3 on Megatron's 1.7B over d = 32 (t = p = 1, B = 512, 16
// micro-batches, nothing recomputed): a layer's 63,730,944 parameters
// reduce-scattered (or all-gathered) over 32 GPUs, 8 a machine sharing
// their NICs, 8 × 25 GB/s at 80%: (31/32)·2·P/160 GB/s + 31 · 5 µs.
TEST(TransformerStep, ZeroTwoAndThreeMoveALayerBesideTheComputeOfTheOneBefore) {
  const TransformerConfig& c = find_transformer_config("megatron-1.7b", "model");
  TransformerTraining t;
  t.data = 32;
  const TransformerStep zero = transformer_step(c, t, 512, a100());
  const double layer = 31.0 / 32 * 2 * 63'730'944.0 / 160e9 + 31 * 5e-6;
  ASSERT_LT(layer, zero.layer_forward_s);  // hidden behind a layer's forward (and backward)
  t.zero_stage = 2;
  const TransformerStep two = transformer_step(c, t, 512, a100());
  EXPECT_DOUBLE_EQ(two.microbatch_s, zero.microbatch_s + layer);  // the first layer's scatter, after the backward
  EXPECT_DOUBLE_EQ(two.sharding_s, 16 * layer);
  // The updated weights all-gathered once, after the last micro-batch.
  EXPECT_DOUBLE_EQ(two.data_parallel_s, 31.0 / 32 * 2 * 1'652'226'048.0 / 160e9 + 31 * 5e-6);
  t.zero_stage = 3;
  const TransformerStep three = transformer_step(c, t, 512, a100());
  EXPECT_DOUBLE_EQ(three.microbatch_s, zero.microbatch_s + 2 * layer);  // the first gather, the last scatter
  EXPECT_DOUBLE_EQ(three.data_parallel_s, 0);
  EXPECT_DOUBLE_EQ(three.optimizer_s, zero.optimizer_s / 32);
  // With the links at a tenth of their rate (16 GB/s) the collectives set
  // the pace: a layer's forward takes its gather, its backward a gather and
  // a scatter; the output layer's 117,964,800-parameter table likewise.
  StepAssumptions slow;
  slow.link_efficiency = 0.1;
  const TransformerStep base = transformer_step(c, TransformerTraining{.data = 32}, 512, a100(), slow);
  const TransformerStep bound = transformer_step(c, t, 512, a100(), slow);
  const double slow_layer = 31.0 / 32 * 2 * 63'730'944.0 / 20e9 + 31 * 5e-6;
  const double table = 31.0 / 32 * 2 * 117'964'800.0 / 20e9 + 31 * 5e-6;
  ASSERT_GT(slow_layer, 2 * base.layer_forward_s);
  const double output = std::max(base.output_layer_s / 3, table) + std::max(2 * base.output_layer_s / 3, 2 * table);
  EXPECT_DOUBLE_EQ(bound.output_layer_s, output);
  EXPECT_DOUBLE_EQ(bound.microbatch_s, 24 * 3 * slow_layer + output + 2 * slow_layer);
}

}  // namespace
}  // namespace trainsim
