// Language models sized for the CPU executor, trained byte-level on Debian's
// fortunes (exec/data/fortunes_text.hpp): a GPT-style decoder and a residual
// LSTM.
#include <string>

#include "model/zoo/builder.hpp"
#include "model/zoo/families.hpp"

namespace trainsim {
namespace {

constexpr int64_t kContext = 64;
constexpr int64_t kBytes = 256;
constexpr int64_t kWidth = 128;
constexpr int64_t kHeads = 4;
constexpr int64_t kBlocks = 2;

// GPT-2's pre-norm decoder block (Radford et al. 2019 §2.3): x + attention(LN(x))
// with a causal mask, then x + MLP(LN(x)), the MLP 4d wide with GELU.
std::string decoder_block(ModelBuilder& b, const std::string& p, const std::string& from) {
  const std::string normed = b.layernorm(p + ".ln1", from);
  std::string x = b.add(p + ".add1", {from, b.attention(p + ".attn", normed, normed, kHeads, /*causal=*/true)});
  std::string m = b.activation(p + ".gelu", "gelu", b.linear(p + ".fc1", b.layernorm(p + ".ln2", x), 4 * kWidth));
  return b.add(p + ".add2", {x, b.linear(p + ".fc2", m, kWidth)});
}

// Byte embedding (256 x 128) plus the sinusoidal position encoding, two
// blocks of width 128 and 4 heads over a context of 64 bytes, final LN, and a
// linear head to the 256 next-byte logits at every position.
Model build_fortunes_gpt() {
  ModelBuilder b("fortunes-gpt", "GPT-style decoder, 2 blocks, width 128, 4 heads, context 64 (bytes of fortunes)",
                 {kContext}, 32);
  std::string x = b.positional_encoding("pos", b.embedding("tok", kModelInput, kBytes, kWidth, /*sparse=*/false));
  for (int64_t i = 0; i < kBlocks; ++i) x = decoder_block(b, "block" + std::to_string(i), x);
  b.linear("head", b.layernorm("ln_f", x), kBytes);
  return std::move(b).build();
}

// Embedding 256·128 = 32,768; per block: LN 2·128 twice, attention 4·128² +
// 4·128 = 66,048, fc1 128·512 + 512 = 66,048, fc2 512·128 + 128 = 65,664, so
// 198,272; final LN 256; head 128·256 + 256 = 33,024.
constexpr int64_t kFortunesGptParams = 32'768 + 2 * 198'272 + 256 + 33'024;  // 462,592

// Byte embedding (256 x 128), two LSTM layers of 128 with a residual
// connection around the second (as seed 000's residual LSTM joins its
// layers), a linear head to the 256 next-byte logits at every position.
Model build_fortunes_lstm() {
  ModelBuilder b("fortunes-lstm", "residual LSTM language model, 2 x 128, context 64 (bytes of fortunes)", {kContext},
                 32);
  const LstmSpec spec{.hidden = kWidth};
  const std::string first = b.lstm("lstm1", b.embedding("tok", kModelInput, kBytes, kWidth, /*sparse=*/false), spec);
  const std::string second = b.add("add", {first, b.lstm("lstm2", first, spec)});
  b.linear("head", second, kBytes);
  return std::move(b).build();
}

// Embedding 32,768; each LSTM 4·128·(128 + 128) + 4·128 = 131,584; head 33,024.
constexpr int64_t kFortunesLstmParams = 32'768 + 2 * 131'584 + 33'024;  // 328,960

}  // namespace

std::vector<ZooEntry> text_lm_zoo_entries() {
  return {
      {"fortunes-gpt", "GPT-style byte-level decoder, 2 x 128 wide, context 64, on Debian's fortunes (CPU-sized)",
       kFortunesGptParams, "hand count of the architecture (this file)", &build_fortunes_gpt},
      {"fortunes-lstm", "residual 2-layer LSTM byte-level language model, 128 wide, context 64, on Debian's fortunes",
       kFortunesLstmParams, "hand count of the architecture (this file)", &build_fortunes_lstm},
  };
}

}  // namespace trainsim
