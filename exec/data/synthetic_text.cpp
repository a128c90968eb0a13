// Generation of the synthetic text set: a Zipf background table, then label
// and tokens per sample from one seeded engine, training samples first.
#include "exec/data/synthetic_text.hpp"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "exec/data/random_bits.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr int64_t kMaxExactFloatId = int64_t{1} << 24;  // float32 holds every integer up to 2^24
constexpr uint64_t kTextStream = 0x74657874;             // "text": this generator's stream of the seed

// Cumulative Zipf(1) weights over ids 0..vocabulary-1, normalised to end at 1.
// Exponent 1 keeps it to divisions, which IEEE rounds the same everywhere
// (std::pow is not correctly rounded on every libm).
std::vector<double> zipf_cdf(int64_t vocabulary) {
  std::vector<double> cdf(static_cast<size_t>(vocabulary));
  double total = 0;
  for (int64_t k = 0; k < vocabulary; ++k) {
    total += 1.0 / static_cast<double>(k + 1);
    cdf[static_cast<size_t>(k)] = total;
  }
  for (double& c : cdf) c /= total;
  return cdf;
}

int64_t draw_zipf(std::mt19937_64& rng, const std::vector<double>& cdf) {
  const double u = uniform_unit(rng);
  const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
  return std::min<int64_t>(it - cdf.begin(), static_cast<int64_t>(cdf.size()) - 1);
}

// Fills `count` samples of x (rows of `tokens` ids) and y.
void draw_samples(std::mt19937_64& rng, const std::vector<double>& cdf, int64_t classes, int64_t count,
                  int64_t tokens, Tensor& x, std::vector<int32_t>& y) {
  const int64_t vocabulary = static_cast<int64_t>(cdf.size());
  x.shape = {count, tokens};
  x.data.resize(static_cast<size_t>(count * tokens));
  y.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(classes)));
    const TokenRange own = class_token_range(vocabulary, classes, label);
    y[static_cast<size_t>(i)] = static_cast<int32_t>(label);
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t id = uniform_unit(rng) < kTextSignalFraction
                             ? own.first + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(own.count)))
                             : draw_zipf(rng, cdf);
      x.data[static_cast<size_t>(i * tokens + t)] = static_cast<float>(id);
    }
  }
}

void require_at_least(int64_t value, int64_t minimum, const std::string& name, const std::string& expected) {
  if (value < minimum) throw InputError("synthetic text: " + name, "is " + std::to_string(value), expected);
}

}  // namespace

TokenRange class_token_range(int64_t vocabulary, int64_t classes, int64_t label) {
  const int64_t upper_half_first = vocabulary / 2;
  const int64_t width = (vocabulary - upper_half_first) / classes;
  return TokenRange{upper_half_first + label * width, width};
}

Dataset make_synthetic_text(int64_t vocabulary, int64_t tokens_per_sample, int64_t classes, int64_t train,
                            int64_t test, uint64_t seed) {
  require_at_least(classes, 2, "classes", "at least 2 classes");
  require_at_least(vocabulary, 2 * classes, "vocabulary",
                   "at least 2 x classes = " + std::to_string(2 * classes) + " token ids");
  if (vocabulary > kMaxExactFloatId) {
    throw InputError("synthetic text: vocabulary", "is " + std::to_string(vocabulary),
                     "at most 2^24 token ids, which float32 samples hold exactly");
  }
  require_at_least(tokens_per_sample, 1, "tokens_per_sample", "at least 1 token per sample");
  require_at_least(train, 0, "train", "a sample count >= 0");
  require_at_least(test, 0, "test", "a sample count >= 0");

  const std::vector<double> cdf = zipf_cdf(vocabulary);
  std::mt19937_64 rng(mix_seed(seed, kTextStream));
  Dataset data;
  data.name = "synthetic-text";
  data.sample_shape = {tokens_per_sample};
  data.classes = classes;
  draw_samples(rng, cdf, classes, train, tokens_per_sample, data.train_x, data.train_y);
  draw_samples(rng, cdf, classes, test, tokens_per_sample, data.test_x, data.test_y);
  return data;
}

}  // namespace trainsim
