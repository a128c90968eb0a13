// The zoo's MLP and sequence family: each model against its published (or
// derived) parameter count, its output shape, sparse tables and hand-checked
// layer facts. Every expected number is derived in the comment beside it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/layer.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

const ZooEntry& entry(const std::string& name) {
  static const std::vector<ZooEntry> entries = sequence_zoo_entries();
  for (const ZooEntry& e : entries) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no sequence-zoo entry " + name);
}

Model build(const std::string& name) {
  Model model = entry(name).build();
  validate_model(model, name);
  return model;
}

const Layer& layer(const Model& model, const std::string& name) {
  auto index = find_layer(model, name);
  if (!index) throw std::runtime_error(model.name + " has no layer " + name);
  return model.layers[*index];
}

int64_t sparse_params(const Model& model) {
  int64_t total = 0;
  for (const Layer& l : model.layers) total += l.sparse ? l.param_count : 0;
  return total;
}

int count_op(const Model& model, const std::string& op) {
  int n = 0;
  for (const Layer& l : model.layers) n += l.op == op ? 1 : 0;
  return n;
}

TEST(SequenceZoo, ListsItsModelsInOrder) {
  std::vector<std::string> names;
  for (const ZooEntry& e : sequence_zoo_entries()) names.push_back(e.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"mnist-mlp", "fmnist-mlp", "snn", "transformer", "residual-lstm", "lm", "nmt",
                                      "text-bag"}));
}

TEST(SequenceZoo, EveryModelValidatesAndNamesItsSource) {
  for (const ZooEntry& e : sequence_zoo_entries()) {
    SCOPED_TRACE(e.name);
    const Model model = e.build();
    EXPECT_NO_THROW(validate_model(model, e.name));
    EXPECT_EQ(model.name, e.name);
    EXPECT_FALSE(e.params_source.empty());
    EXPECT_GT(e.published_params, 0);
  }
}

// Exact where the figure is derived from the architecture; where the source
// rounds, within that rounding (see the per-model tests for why).
TEST(SequenceZoo, ParamCountsMatchPublishedFigures) {
  // Transformer: "65M" with a vocabulary of "about 37000" (see below); lm and
  // nmt: Table 1 rounds dense and sparse to millions each.
  const std::vector<std::pair<std::string, int64_t>> tolerance{
      {"mnist-mlp", 0},           {"fmnist-mlp", 0}, {"snn", 0},         {"residual-lstm", 0},
      {"transformer", 2'500'000}, {"lm", 1'000'000}, {"nmt", 1'000'000}, {"text-bag", 0},
  };
  for (const auto& [name, allowed] : tolerance) {
    SCOPED_TRACE(name);
    EXPECT_LE(std::llabs(param_count(build(name)) - entry(name).published_params), allowed);
  }
}

TEST(SequenceZoo, AllModelsBuildWellUnderASecond) {
  const auto start = std::chrono::steady_clock::now();
  for (const ZooEntry& e : sequence_zoo_entries()) e.build();
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed_s, 0.5);
}

TEST(MnistMlp, HasTheDerivedCountShapeAndFlops) {
  const Model m = build("mnist-mlp");
  // 784·500+500 + 500·500+500 + 500·10+10 = 392,500 + 250,500 + 5,010.
  EXPECT_EQ(param_count(m), 648'010);
  EXPECT_EQ(m.input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{10});
  EXPECT_EQ(layer(m, "fc1").param_count, 392'500);
  // fc1 2·784·500+500 = 784,500; fc2 2·500·500+500 = 500,500; fc3 2·500·10+10
  // = 10,010; two ReLUs 500 each; softmax 5·10 = 50: 1,296,060.
  EXPECT_DOUBLE_EQ(forward_flops(m), 1'296'060.0);
}

TEST(FmnistMlp, HasTheDerivedCountAndBatch64) {
  const Model m = build("fmnist-mlp");
  // 784·256+256 + 256·128+128 + 128·10+10 = 200,960 + 32,896 + 1,290.
  EXPECT_EQ(param_count(m), 235'146);
  EXPECT_EQ(m.default_batch, 64);
  EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{10});
}

TEST(Snn, Stacks32SeluLayersOf2048OnCifar10) {
  const Model m = build("snn");
  EXPECT_EQ(count_op(m, "selu"), 32);
  EXPECT_EQ(count_op(m, "linear"), 33);  // 32 hidden + classifier
  EXPECT_EQ(m.input_shape, (std::vector<int64_t>{3, 32, 32}));
  // 3·32·32 = 3072 inputs: 3072·2048 + 2048 = 6,293,504.
  EXPECT_EQ(layer(m, "fc0").param_count, 6'293'504);
  // 2048·2048 + 2048 = 4,196,352.
  EXPECT_EQ(layer(m, "fc31").param_count, 4'196'352);
  EXPECT_EQ(layer(m, "fc31").output_shape, std::vector<int64_t>{2048});
  // 6,293,504 + 31·4,196,352 + (2048·10+10 = 20,490).
  EXPECT_EQ(param_count(m), 136'400'906);
  EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{10});
  EXPECT_EQ(m.default_batch, 128);
}

TEST(Transformer, BaseModelCountsAndTiesItsEmbeddings) {
  const Model m = build("transformer");
  // Table 37000·512 = 18,944,000; encoder block 3,152,384 (attention 1,050,624,
  // FFN 2,099,712, layernorms 2,048); decoder block 4,204,032 (two attentions,
  // FFN, three layernorms): 18,944,000 + 6·3,152,384 + 6·4,204,032.
  EXPECT_EQ(param_count(m), 63'082'496);
  // Vaswani's "65M" fits ~40.8k table rows; with "about 37000" we are 1.9M
  // below, inside the 2.5M that the vocabulary's vagueness allows.
  EXPECT_NEAR(static_cast<double>(param_count(m)), 65e6, 2.5e6);
  // The tied table is counted once, on the projection (512·37000, no bias).
  EXPECT_EQ(layer(m, "output_projection").param_count, 18'944'000);
  EXPECT_EQ(layer(m, "encoder.embedding").param_count, 0);
  EXPECT_EQ(layer(m, "decoder.embedding").param_count, 0);
  EXPECT_EQ(layer(m, "encoder.embedding").output_shape, (std::vector<int64_t>{20, 512}));
  // The tied table gets the projection's dense gradient: not sparse.
  EXPECT_EQ(sparse_params(m), 0);
  // 6 encoder + 2·6 decoder attentions; 2·6 + 3·6 layernorms.
  EXPECT_EQ(count_op(m, "attention"), 18);
  EXPECT_EQ(count_op(m, "layernorm"), 30);
  EXPECT_EQ(m.layers.back().output_shape, (std::vector<int64_t>{20, 37000}));
}

TEST(Transformer, AttentionAndProjectionFlopsFollowTheConvention) {
  const Model m = build("transformer");
  const Layer& attention = layer(m, "encoder.0.self_attn");
  EXPECT_EQ(attention.param_count, 4 * 512 * 512 + 4 * 512);  // 1,050,624
  // T = Tk = 20, d = 512: Q, K, V, output 4·2·20·512² = 41,943,040; scores and
  // weighted sum 4·20·20·512 = 819,200; softmax 5·20·20·8 = 16,000.
  EXPECT_DOUBLE_EQ(attention.forward_flops, 42'778'240.0);
  const Layer& cross = layer(m, "decoder.5.cross_attn");
  EXPECT_EQ(cross.inputs, (std::vector<std::string>{"decoder.5.norm1", "encoder.5.norm2"}));
  // 20 tokens · 2·512·37000 = 757,760,000.
  EXPECT_DOUBLE_EQ(layer(m, "output_projection").forward_flops, 757'760'000.0);
}

TEST(ResidualLstm, EightProjectedLayersWithResidualAdds) {
  const Model m = build("residual-lstm");
  EXPECT_EQ(count_op(m, "lstm"), 8);
  EXPECT_EQ(count_op(m, "add"), 7);  // between consecutive layers
  // 4·1024·(512 + 512) + 4·1024 + 1024·512 = 4,194,304 + 4,096 + 524,288.
  EXPECT_EQ(layer(m, "lstm3").param_count, 4'722'688);
  EXPECT_EQ(layer(m, "lstm3").output_shape, (std::vector<int64_t>{20, 512}));
  EXPECT_EQ(layer(m, "residual3").inputs, (std::vector<std::string>{"residual2", "lstm3"}));
  const Layer& embedding = layer(m, "embedding");
  EXPECT_TRUE(embedding.sparse);
  EXPECT_EQ(embedding.sparse_rows, 89'527);
  // 89,527·512 + 8·4,722,688 + 512·2+2 = 45,837,824 + 37,781,504 + 1,026.
  EXPECT_EQ(param_count(m), 83'620'354);
  EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{2});
}

TEST(Lm, DenseAndSparseCountsMatchParallaxTable1) {
  const Model m = build("lm");
  // Dense: the LSTM, 4·2048·(512+512) + 4·2048 + 2048·512 = 9,445,376 (Table 1: 9M).
  EXPECT_EQ(param_count(m) - sparse_params(m), 9'445'376);
  EXPECT_NEAR(static_cast<double>(param_count(m) - sparse_params(m)), 9e6, 0.5e6);
  // Sparse: embedding 793,470·512 = 406,256,640; softmax 406,256,640 + 793,470
  // bias = 813,306,750. Table 1 says 814M, 0.7M more than the example's shapes
  // give (its rounding is not reproducible from the code), so we allow 1M.
  EXPECT_EQ(sparse_params(m), 813'306'750);
  EXPECT_NEAR(static_cast<double>(sparse_params(m)), 814e6, 1e6);
  EXPECT_EQ(m.default_batch, 128);
}

TEST(Lm, LstmFlopsAndSampledSoftmaxShape) {
  const Model m = build("lm");
  // Per step 2·4·2048·(512+512) + 12·2048 + 2·2048·512 = 16,777,216 + 24,576 +
  // 2,097,152 = 18,898,944; ×20 steps.
  EXPECT_DOUBLE_EQ(layer(m, "lstm").forward_flops, 377'978'880.0);
  const Layer& logits = layer(m, "softmax.sampled_logits");
  EXPECT_EQ(logits.output_shape, (std::vector<int64_t>{20, 8193}));  // true class + 8192 samples
  // 20 steps · 8193 classes · (2·512 + 1).
  EXPECT_DOUBLE_EQ(logits.forward_flops, 20.0 * 8193 * 1025);
  EXPECT_EQ(m.layers.back().output_shape, (std::vector<int64_t>{20, 8193}));
}

TEST(Lm, SparseRowsTouchedPerBatchMatchParallaxSubset) {
  const Model m = build("lm");
  // Table 1 "Subset": 6.5M sparse parameters used per iteration at batch 128.
  // Uniform draws: embedding 1 - (1-1/V)^2560 ≈ 0.0032211 of 793,470·512
  // ≈ 1.309M; softmax (20 + 8192/128 = 84 rows per sample) 1 - (1-1/V)^10752
  // ≈ 0.013458 of 793,470·513 ≈ 5.478M; sum ≈ 6.79M. Real word frequencies
  // repeat rows more than uniform draws do, so the estimate sits a few percent
  // above the measurement; we allow 10%.
  double touched = 0;
  for (const Layer& l : m.layers) {
    if (l.sparse) touched += sparse_fraction(l, 128) * static_cast<double>(l.param_count);
  }
  EXPECT_NEAR(touched, 6.79e6, 0.01e6);
  EXPECT_NEAR(touched, 6.5e6, 0.65e6);
}

TEST(Nmt, DenseAndSparseCountsMatchParallaxTable1) {
  const Model m = build("nmt");
  // Sparse: two tables of 36,549·1024 = 37,426,176 (Table 1: 75M).
  EXPECT_EQ(sparse_params(m), 74'852'352);
  EXPECT_NEAR(static_cast<double>(sparse_params(m)), 75e6, 0.5e6);
  // Dense: bi-LSTM 2·(4·1024·2048 + 4096) = 16,785,408; LSTM on 2048:
  // 4·1024·3072 + 4096 = 12,587,008; attention LSTM 12,587,008 + attention
  // 1024·1024·2 + 1024 + 1 + 1024 = 14,686,209; top LSTM 12,587,008;
  // projection 1024·36,549 = 37,426,176: 94,071,809 (Table 1: 94M).
  EXPECT_EQ(param_count(m) - sparse_params(m), 94'071'809);
  EXPECT_NEAR(static_cast<double>(param_count(m) - sparse_params(m)), 94e6, 0.5e6);
  EXPECT_EQ(layer(m, "decoder.lstm0_attention").param_count, 14'686'209);
}

TEST(Nmt, ShapesFollowTheGnmtDataflow) {
  const Model m = build("nmt");
  // 50 source + 50 target tokens.
  EXPECT_EQ(m.input_shape, std::vector<int64_t>{100});
  EXPECT_EQ(layer(m, "encoder.lstm0").output_shape, (std::vector<int64_t>{50, 2048}));  // both directions
  EXPECT_EQ(layer(m, "encoder.lstm1").output_shape, (std::vector<int64_t>{50, 1024}));
  const Layer& bottom = layer(m, "decoder.lstm0_attention");
  EXPECT_EQ(bottom.inputs, (std::vector<std::string>{"decoder.dropout0", "encoder.lstm1"}));
  EXPECT_EQ(bottom.output_shape, (std::vector<int64_t>{50, 2048}));  // [output ; context]
  // LSTM: 50·(2·4·1024·3072 + 12·1024) = 50·25,178,112 = 1,258,905,600.
  // Attention: keys 2·50·1024·1024 = 104,857,600; per target step query
  // 2·1024² = 2,097,152 plus 50 source steps · (5·1024 + 2·1024 + 5) = 358,650:
  // 50·2,455,802 = 122,790,100. Total 1,486,553,300.
  EXPECT_DOUBLE_EQ(bottom.forward_flops, 1'486'553'300.0);
  EXPECT_EQ(m.layers.back().output_shape, (std::vector<int64_t>{50, 36549}));
  EXPECT_EQ(m.default_batch, 128);
}

TEST(TextBag, HasTheDerivedCountWithASparseTable) {
  const Model m = build("text-bag");
  // 50,000·64 sparse + 64·64+64 + 64·4+4 = 3,200,000 + 4,160 + 260.
  EXPECT_EQ(param_count(m), 3'204'420);
  EXPECT_EQ(sparse_params(m), 3'200'000);
  EXPECT_EQ(layer(m, "fc1").param_count, 4'160);
  EXPECT_EQ(layer(m, "fc2").param_count, 260);
}

TEST(TextBag, SumsThirtyTwoTokenEmbeddingsIntoFourClasses) {
  const Model m = build("text-bag");
  EXPECT_EQ(m.input_shape, std::vector<int64_t>{32});
  const Layer& bag = layer(m, "embedding");
  EXPECT_EQ(bag.op, "embedding_bag");
  EXPECT_EQ(bag.output_shape, std::vector<int64_t>{64});
  EXPECT_EQ(bag.sparse_rows, 50'000);
  EXPECT_DOUBLE_EQ(bag.sparse_rows_per_sample, 32.0);
  // The sum of 32 rows of 64: 32·64 = 2,048 adds.
  EXPECT_DOUBLE_EQ(bag.forward_flops, 2'048.0);
  // fc1 reads the bag's {64}, not one row per token: 2·64·64 + 64 = 8,256.
  EXPECT_DOUBLE_EQ(layer(m, "fc1").forward_flops, 8'256.0);
  EXPECT_EQ(m.layers.back().output_shape, std::vector<int64_t>{4});
  EXPECT_EQ(count_op(m, "linear"), 2);
}

}  // namespace
}  // namespace trainsim
