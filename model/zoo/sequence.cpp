// The zoo's MLP and sequence family: seed 002's MNIST-MLP, a CPU-sized
// Fashion-MNIST MLP, seed 000's SNN, Transformer and Residual LSTM, seed 004's
// LM and NMT, and a CPU-sized sparse text classifier (text-bag). Per-sample
// shapes: images {C,H,W}, token ids {T}, sequences {T, features}. A model
// that reads two token streams (source, target) gets them end to end in its
// input; slice layers take them apart.
#include <string>
#include <utility>
#include <vector>

#include "model/zoo/builder.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

std::string numbered(const std::string& prefix, int index) { return prefix + std::to_string(index); }

// ---------------------------------------------------------------- MLPs

// flatten -> (linear, relu)* -> linear -> softmax. The softmax is the loss's,
// listed so its cost is counted.
Model build_relu_mlp(const std::string& name, const std::string& description, std::vector<int64_t> input_shape,
                     int64_t default_batch, const std::vector<int64_t>& widths) {
  ModelBuilder b(name, description, std::move(input_shape), default_batch);
  std::string x = b.flatten("flatten", kModelInput);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    x = b.relu(numbered("relu", static_cast<int>(i + 1)),
               b.linear(numbered("fc", static_cast<int>(i + 1)), x, widths[i]));
  }
  x = b.linear(numbered("fc", static_cast<int>(widths.size())), x, widths.back());
  b.softmax("softmax", x);
  return std::move(b).build();
}

// Seed 002 §4 "MNIST-MLP": a 3-layer perceptron, both hidden layers 500 wide.
// Params: 784·500+500 + 500·500+500 + 500·10+10 = 392,500 + 250,500 + 5,010 = 648,010.
// Seed 002 gives a global batch whose value is lost from our copy of the text;
// 128 is the common MNIST batch.
Model build_mnist_mlp() {
  return build_relu_mlp("mnist-mlp", "MLP 784-500-500-10, ReLU (MNIST)", {1, 28, 28}, 128, {500, 500, 10});
}

// A small Fashion-MNIST MLP for CPU runs. Params:
// 784·256+256 + 256·128+128 + 128·10+10 = 200,960 + 32,896 + 1,290 = 235,146.
Model build_fmnist_mlp() {
  return build_relu_mlp("fmnist-mlp", "MLP 784-256-128-10, ReLU (Fashion-MNIST)", {1, 28, 28}, 64, {256, 128, 10});
}

// Seed 000 §4.1: "SNN [Klambauer et al. 2017] is stacked by 32 fully-connected
// layers with 2048 hidden units", trained on CIFAR-10. We read the 32 as hidden
// layers, each followed by SELU (the self-normalizing activation), topped by a
// 10-way classifier. Params:
// 3072·2048+2048 + 31·(2048·2048+2048) + 2048·10+10
// = 6,293,504 + 130,086,912 + 20,490 = 136,400,906. Batch 128 (seed 000 §4.1).
constexpr int kSnnHiddenLayers = 32;
constexpr int64_t kSnnWidth = 2048;

Model build_snn() {
  ModelBuilder b("snn", "self-normalizing MLP, 32 x 2048 SELU (CIFAR-10)", {3, 32, 32}, 128);
  std::string x = b.flatten("flatten", kModelInput);
  for (int i = 0; i < kSnnHiddenLayers; ++i) {
    x = b.activation(numbered("selu", i), "selu", b.linear(numbered("fc", i), x, kSnnWidth));
  }
  b.softmax("softmax", b.linear("classifier", x, 10));
  return std::move(b).build();
}

// ---------------------------------------------------------------- shared pieces

// Takes `tokens` ids out of the model input (no parameters, no arithmetic).
std::string token_slice(ModelBuilder& b, const std::string& name, int64_t tokens) {
  return b.custom(Layer{name, "slice", {kModelInput}, {tokens}});
}

// ---------------------------------------------------------------- Transformer

// Seed 000 §4.1 trains "Transformer [Vaswani et al. 2017]" with "6 blocks in both
// encoder and decoder with 8 heads", sentences truncated to 20 words, "most of
// parameters the same as the original model". The seed names no vocabulary, so
// this is Vaswani's base model: d_model 512, feed-forward 2048, post-norm
// blocks, the shared ~37000-token BPE en-de vocabulary, and one embedding table
// shared by encoder input, decoder input and the pre-softmax projection
// (Vaswani §3.4). Positional encodings are fixed sinusoids (no parameters).
// Params: table 37000·512 = 18,944,000; encoder block = attention 4·512²+4·512
// (1,050,624) + FFN 512·2048+2048 + 2048·512+512 (2,099,712) + 2 layernorms
// (2,048) = 3,152,384; decoder block = 2 attentions + FFN + 3 layernorms
// = 4,204,032; total 18,944,000 + 6·3,152,384 + 6·4,204,032 = 63,082,496,
// against Vaswani Table 3's rounded "65M" for base.
constexpr int64_t kTransformerTokens = 20;
constexpr int64_t kTransformerWidth = 512;
constexpr int64_t kTransformerHeads = 8;
constexpr int64_t kTransformerFeedForward = 2048;
constexpr int kTransformerBlocks = 6;
constexpr int64_t kTransformerVocabulary = 37000;

// dropout -> residual add -> layernorm, closing each sub-layer (Vaswani §5.4, §3.1).
std::string close_sublayer(ModelBuilder& b, const std::string& prefix, const std::string& norm,
                           const std::string& residual, const std::string& sublayer) {
  const std::string dropped = b.dropout(prefix + ".dropout", sublayer);
  return b.layernorm(norm, b.add(prefix + ".add", {residual, dropped}));
}

std::string feed_forward(ModelBuilder& b, const std::string& prefix, const std::string& from) {
  std::string x = b.linear(prefix + ".linear1", from, kTransformerFeedForward);
  x = b.relu(prefix + ".relu", x);
  return b.linear(prefix + ".linear2", x, kTransformerWidth);
}

std::string encoder_block(ModelBuilder& b, int index, const std::string& from) {
  const std::string p = numbered("encoder.", index);
  std::string x = close_sublayer(b, p + ".self_attn", p + ".norm1", from,
                                 b.attention(p + ".self_attn", from, from, kTransformerHeads));
  return close_sublayer(b, p + ".ffn", p + ".norm2", x, feed_forward(b, p + ".ffn", x));
}

std::string decoder_block(ModelBuilder& b, int index, const std::string& from, const std::string& memory) {
  const std::string p = numbered("decoder.", index);
  std::string x = close_sublayer(b, p + ".self_attn", p + ".norm1", from,
                                 b.attention(p + ".self_attn", from, from, kTransformerHeads));
  x = close_sublayer(b, p + ".cross_attn", p + ".norm2", x,
                     b.attention(p + ".cross_attn", x, memory, kTransformerHeads));
  return close_sublayer(b, p + ".ffn", p + ".norm3", x, feed_forward(b, p + ".ffn", x));
}

// A lookup in the table the output projection owns: {T} ids -> {T, d}, no
// parameters of its own, no arithmetic.
std::string tied_lookup(ModelBuilder& b, const std::string& name, const std::string& tokens) {
  return b.custom(Layer{name, "embedding", {tokens}, {b.shape_of(tokens)[0], kTransformerWidth}});
}

// Embedding lookup -> positional encoding (adds the sinusoid; the √d scale is
// folded in) -> dropout.
std::string embed_positions(ModelBuilder& b, const std::string& prefix, const std::string& embedded) {
  return b.dropout(prefix + ".embedding_dropout",
                   b.activation(prefix + ".positional_encoding", "positional_encoding", embedded));
}

Model build_transformer() {
  // Batch 128: seed 000 §4.1 trains every model with 128.
  ModelBuilder b("transformer", "Transformer base, 6+6 blocks, d=512, 8 heads, 20+20 tokens (seed 000)",
                 {2 * kTransformerTokens}, 128);
  const std::string source = token_slice(b, "source_tokens", kTransformerTokens);
  const std::string target = token_slice(b, "target_tokens", kTransformerTokens);

  // The shared table is counted once, on the pre-softmax projection: that is
  // where its dense gradient is computed (two GEMMs), and a table with a dense
  // gradient is not sparse. The two lookups read it and own no parameters.
  std::string x = tied_lookup(b, "encoder.embedding", source);
  x = embed_positions(b, "encoder", x);
  for (int i = 0; i < kTransformerBlocks; ++i) x = encoder_block(b, i, x);
  const std::string memory = x;

  std::string y = tied_lookup(b, "decoder.embedding", target);
  y = embed_positions(b, "decoder", y);
  for (int i = 0; i < kTransformerBlocks; ++i) y = decoder_block(b, i, y, memory);

  // No bias (Vaswani §3.4 shares the matrix only).
  y = b.linear("output_projection", y, kTransformerVocabulary, false);
  b.softmax("softmax", y);
  return std::move(b).build();
}

// ---------------------------------------------------------------- Residual LSTM

// Seed 000 §4.1: "Residual LSTM [Kim et al. 2017] comprises 8 layers of LSTM
// with 512 embedding units, 512 output units, and 1024 memory units", trained
// on IMDb sentiment with TensorFlow r1.5. Each layer is an LSTM with projection
// (1024 cells -> 512, one 4h bias as TensorFlow's LSTMCell); from the second
// layer on, the layer's input is added to its output (Kim's shortcut, identity
// since widths match). The seed gives no sentence length: we use the 20 words
// it uses for the Transformer on the same dataset. The last step's output
// feeds a 2-way classifier. Vocabulary: the IMDb dataset's imdb.vocab (Maas et
// al. 2011), 89,527 words. No published count; derived:
// embedding 89,527·512 = 45,837,824; each layer 4·1024·(512+512) + 4·1024 +
// 1024·512 = 4,722,688, ×8 = 37,781,504; classifier 512·2+2 = 1,026;
// total 83,620,354.
constexpr int64_t kImdbVocabulary = 89527;
constexpr int64_t kImdbTokens = 20;
constexpr int kResidualLstmLayers = 8;

Model build_residual_lstm() {
  ModelBuilder b("residual-lstm", "8-layer residual LSTMP 1024->512, 20 tokens (IMDb sentiment)", {kImdbTokens}, 128);
  // Untied lookup table: its gradient touches only the looked-up rows (sparse).
  std::string x = b.embedding("embedding", kModelInput, kImdbVocabulary, 512, true);
  for (int i = 0; i < kResidualLstmLayers; ++i) {
    const std::string out = b.lstm(numbered("lstm", i), x, LstmSpec{1024, 512, false, 1});
    x = i == 0 ? out : b.add(numbered("residual", i), {x, out});
  }
  x = b.custom(Layer{"last_step", "slice", {x}, {512}});
  b.softmax("softmax", b.linear("classifier", x, 2));
  return std::move(b).build();
}

// ---------------------------------------------------------------- LM (seed 004)

// Seed 004 §7.1 "LM [Jozefowicz et al. 2016]": one LSTM of 2048 cells projected
// to 512, One Billion Word Benchmark, trained as Parallax's lm1b example (from
// rafaljozefowicz/lm): vocabulary 793,470 (its "800K"), 20 steps per sample,
// batch 128 per GPU, dropout 0.1 on the LSTM's input and output, sampled
// softmax with 8192 candidates per batch. The input embedding (793,470×512)
// and the softmax weights and bias (793,470×512 + 793,470) are gathered by row,
// so Parallax treats them as sparse (seed 004 Table 1: "LM 9M dense, 814M
// sparse"). Ours: dense LSTM 4·2048·(512+512) + 4·2048 + 2048·512 = 9,445,376;
// sparse 2·406,256,640 + 793,470 = 813,306,750; total 822,752,126.
constexpr int64_t kLm1bVocabulary = 793470;
constexpr int64_t kLmSteps = 20;
constexpr int64_t kLmSampledPerBatch = 8192;
constexpr int64_t kLmBatch = 128;

// Sampled softmax (Jean et al. 2015, as tf.nn.sampled_softmax_loss): each step
// scores its true class and the batch's shared sampled classes, gathering
// those rows of the softmax weights and bias. Output: logits {T, samples + 1}.
// Rows per sample: T true classes + samples/batch shared ones (exact at
// `batch`, the batch the samples are drawn for).
std::string sampled_softmax_logits(ModelBuilder& b, const std::string& name, const std::string& from,
                                   int64_t vocabulary, int64_t sampled_per_batch, int64_t batch) {
  const int64_t steps = b.shape_of(from)[0];
  const int64_t width = b.shape_of(from)[1];
  const int64_t classes = sampled_per_batch + 1;
  Layer layer{name, "sampled_softmax", {from}, {steps, classes}};
  layer.param_count = vocabulary * width + vocabulary;
  layer.forward_flops = steps * classes * (2.0 * width + 1);  // dot product + bias per scored class
  layer.sparse = true;
  layer.sparse_rows = vocabulary;
  layer.sparse_rows_per_sample = steps + static_cast<double>(sampled_per_batch) / batch;
  return b.custom(std::move(layer));
}

Model build_lm() {
  ModelBuilder b("lm", "LSTM-2048-512 language model, 20 steps, sampled softmax (LM1B, seed 004)", {kLmSteps},
                 kLmBatch);
  std::string x = b.embedding("embedding", kModelInput, kLm1bVocabulary, 512, true);
  x = b.dropout("embedding.dropout", x);
  x = b.lstm("lstm", x, LstmSpec{2048, 512, false, 1});
  x = b.dropout("lstm.dropout", x);
  x = sampled_softmax_logits(b, "softmax.sampled_logits", x, kLm1bVocabulary, kLmSampledPerBatch, kLmBatch);
  b.softmax("softmax", x);
  return std::move(b).build();
}

// ---------------------------------------------------------------- NMT (seed 004)

// Seed 004 §7.1 "NMT [Wu et al. 2016]" is Parallax's nmt example, tensorflow/nmt's
// GNMT (wmt16_gnmt_4_layer.json: gnmt encoder, gnmt_v2 normed-Bahdanau
// attention, 1024 units, dropout 0.2, batch 128, sentences up to 50 tokens,
// separate source and target tables over the WMT16 BPE vocabulary of 36,549
// tokens, output projection without bias). The seed's text says 4 layers, but
// its Table 1 counts (94M dense, 75M sparse) are those of 2 encoder + 2 decoder
// layers: in 2018 tensorflow/nmt built that file's model with 2+2 layers
// (tensorflow/nmt issue #329), and 4+4 would give 136M dense. We model what
// Table 1 measured. Encoder: bidirectional LSTM, then one LSTM on its 2048-wide
// output. Decoder: the bottom LSTM reads [embedding ; previous context] and
// queries the attention; the top LSTM reads [bottom output ; context]. With
// 2+2 layers tensorflow/nmt adds no residual connections.
// Dense: 16,785,408 (bi-LSTM, 2·(4·1024·2048 + 4096)) + 12,587,008 (LSTM on
// 2048: 4·1024·3072 + 4096) + 14,686,209 (attention LSTM + attention) +
// 12,587,008 + 37,426,176 (projection 1024·36,549) = 94,071,809;
// sparse: 2·36,549·1024 = 74,852,352; total 168,924,161.
constexpr int64_t kWmtBpeVocabulary = 36549;
constexpr int64_t kNmtTokens = 50;
constexpr int64_t kNmtUnits = 1024;

// tensorflow/nmt's GNMT bottom decoder layer: an LSTM fed [input ; previous
// attention context] whose new output queries normalized Bahdanau attention
// (Bahdanau et al. 2015; Salimans & Kingma 2016 weight normalization) over the
// encoder output. The per-step recurrence ties the LSTM and the attention, so
// they are one layer. Output per step: [LSTM output ; context].
std::string attention_lstm(ModelBuilder& b, const std::string& name, const std::string& from, const std::string& memory,
                           int64_t units) {
  const int64_t steps = b.shape_of(from)[0];
  const int64_t input_width = b.shape_of(from)[1];
  const int64_t source_steps = b.shape_of(memory)[0];
  const int64_t memory_width = b.shape_of(memory)[1];  // context width (no attention layer)
  const int64_t lstm_input = input_width + memory_width;
  // LSTM as builder.hpp counts it: 4h·(in + h) weights and one 4h bias.
  const int64_t lstm_params = 4 * units * (lstm_input + units) + 4 * units;
  const double lstm_flops_per_step = 2.0 * 4 * units * (lstm_input + units) + 12.0 * units;
  // Memory layer (memory_width×units), query layer (units×units), v, g, b.
  const int64_t attention_params = memory_width * units + units * units + units + 1 + units;
  // Keys once per source step; per target step: the query projection; per
  // (target, source) pair 5·units for v·tanh(key + query + b) and 2·memory_width
  // for the context sum; 5 per pair for the softmax.
  const double attention_flops =
      2.0 * source_steps * memory_width * units +
      steps * (2.0 * units * units + source_steps * (5.0 * units + 2.0 * memory_width + 5.0));
  Layer layer{name, "attention_lstm", {from, memory}, {steps, units + memory_width}};
  layer.param_count = lstm_params + attention_params;
  layer.forward_flops = steps * lstm_flops_per_step + attention_flops;
  return b.custom(std::move(layer));
}

Model build_nmt() {
  ModelBuilder b("nmt", "GNMT 2+2 LSTM 1024, bi encoder, attention, 50+50 tokens (WMT16 de-en, seed 004)",
                 {2 * kNmtTokens}, 128);
  const LstmSpec lstm{kNmtUnits, 0, false, 1};
  const std::string source = token_slice(b, "source_tokens", kNmtTokens);
  const std::string target = token_slice(b, "target_tokens", kNmtTokens);

  // Dropout sits on every LSTM's input (tensorflow/nmt's DropoutWrapper).
  std::string x = b.embedding("encoder.embedding", source, kWmtBpeVocabulary, kNmtUnits, true);
  x = b.lstm("encoder.lstm0", b.dropout("encoder.dropout0", x), LstmSpec{kNmtUnits, 0, true, 1});
  const std::string memory = b.lstm("encoder.lstm1", b.dropout("encoder.dropout1", x), lstm);

  std::string y = b.embedding("decoder.embedding", target, kWmtBpeVocabulary, kNmtUnits, true);
  y = attention_lstm(b, "decoder.lstm0_attention", b.dropout("decoder.dropout0", y), memory, kNmtUnits);
  y = b.lstm("decoder.lstm1", b.dropout("decoder.dropout1", y), lstm);
  y = b.linear("decoder.output_projection", y, kWmtBpeVocabulary, false);
  b.softmax("softmax", y);
  return std::move(b).build();
}

// ---------------------------------------------------------------- text-bag

// A CPU-sized sparse text classifier for Parallax runs (seed 004's sparse
// embedding gradients at a scale one machine trains): the sum of 32 token
// embeddings from a 50,000 x 64 sparse table, a 64-wide hidden layer, 4
// classes. It trains on fortunes of four topics as bags of hashed words
// (exec/data/fortune_topics.hpp), or on generated tokens
// (exec/data/synthetic_text.hpp, with the same defaults). Params: 50,000·64 (sparse) + 64·64+64 + 64·4+4
// = 3,200,000 + 4,160 + 260 = 3,204,420.
constexpr int64_t kTextBagVocabulary = 50'000;
constexpr int64_t kTextBagTokens = 32;
constexpr int64_t kTextBagDim = 64;
constexpr int64_t kTextBagClasses = 4;

Model build_text_bag() {
  ModelBuilder b("text-bag", "bag of 32 word embeddings (sparse 50,000 x 64) -> 64 -> 4 topics of fortunes",
                 {kTextBagTokens}, 64);
  std::string x = b.embedding_bag("embedding", kModelInput, kTextBagVocabulary, kTextBagDim);
  x = b.relu("relu1", b.linear("fc1", x, kTextBagDim));
  b.softmax("softmax", b.linear("fc2", x, kTextBagClasses));
  return std::move(b).build();
}

}  // namespace

std::vector<ZooEntry> sequence_zoo_entries() {
  return {
      {"mnist-mlp", "MLP 784-500-500-10 on MNIST (seed 002)", 648010, "derived: 784-500-500-10 with biases",
       &build_mnist_mlp},
      {"fmnist-mlp", "MLP 784-256-128-10 on Fashion-MNIST (CPU-sized)", 235146, "derived: 784-256-128-10 with biases",
       &build_fmnist_mlp},
      {"snn", "self-normalizing MLP, 32 x 2048 SELU, CIFAR-10 (seed 000)", 136400906,
       "derived: seed 000 sec. 4.1, 32 hidden layers of 2048 + classifier", &build_snn},
      {"transformer", "Transformer base 6+6 blocks, 20-token sentences (seed 000)", 65000000,
       "Vaswani et al. 2017 Table 3, base: 65M (rounded; ~37000-token vocabulary)", &build_transformer},
      {"residual-lstm", "8-layer residual LSTMP 1024->512 on IMDb (seed 000)", 83620354,
       "derived: seed 000 sec. 4.1 with the IMDb vocabulary (89,527)", &build_residual_lstm},
      {"lm", "LSTM-2048-512 language model on LM1B, sparse embedding and softmax (seed 004)", 823000000,
       "Parallax (seed 004) Table 1: 9M dense + 814M sparse (rounded to millions)", &build_lm},
      {"nmt", "GNMT 2+2 LSTM 1024 with attention on WMT16 de-en, sparse embeddings (seed 004)", 169000000,
       "Parallax (seed 004) Table 1: 94M dense + 75M sparse (rounded to millions)", &build_nmt},
      {"text-bag", "bag-of-embeddings text classifier, sparse 50,000 x 64 table, 4 classes (CPU-sized)", 3204420,
       "derived: 50,000·64 sparse table + 64-64-4 with biases", &build_text_bag},
  };
}

}  // namespace trainsim
