// The synthetic text set: shapes, determinism, the class-dependent token
// distribution (a token-count vote separates the classes far above chance),
// its Zipf background, argument checks, and agreement with the zoo's text-bag.
#include "exec/data/synthetic_text.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/error.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

Dataset small_default_set(uint64_t seed) {
  return make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 2000, 1000, seed);
}

TEST(SyntheticText, HasTheRequestedShapesAndIntegerIdsInTheVocabulary) {
  const Dataset data = make_synthetic_text(1000, 8, 3, 50, 20, 1);
  EXPECT_EQ(data.name, "synthetic-text");
  EXPECT_EQ(data.sample_shape, std::vector<int64_t>{8});
  EXPECT_EQ(data.classes, 3);
  EXPECT_EQ(data.train_x.shape, (std::vector<int64_t>{50, 8}));
  EXPECT_EQ(data.test_x.shape, (std::vector<int64_t>{20, 8}));
  EXPECT_EQ(data.train_y.size(), 50u);
  EXPECT_EQ(data.test_y.size(), 20u);
  for (float id : data.train_x.data) {
    ASSERT_EQ(id, static_cast<float>(static_cast<int64_t>(id)));
    ASSERT_TRUE(id >= 0 && id < 1000) << id;
  }
  for (int32_t label : data.test_y) ASSERT_TRUE(label >= 0 && label < 3) << label;
}

TEST(SyntheticText, TheSameSeedGivesTheSameDataBitForBit) {
  const Dataset a = small_default_set(42);
  const Dataset b = small_default_set(42);
  EXPECT_EQ(a.train_x.data, b.train_x.data);
  EXPECT_EQ(a.train_y, b.train_y);
  EXPECT_EQ(a.test_x.data, b.test_x.data);
  EXPECT_EQ(a.test_y, b.test_y);
}

TEST(SyntheticText, AnotherSeedGivesOtherData) {
  EXPECT_NE(small_default_set(1).train_x.data, small_default_set(2).train_x.data);
}

TEST(SyntheticText, ClassRangesSliceTheUpperHalfOfTheVocabulary) {
  // 50,000 ids: upper half [25,000, 50,000) in 4 slices of 6,250.
  EXPECT_EQ(class_token_range(50'000, 4, 0).first, 25'000);
  EXPECT_EQ(class_token_range(50'000, 4, 3).first, 43'750);
  EXPECT_EQ(class_token_range(50'000, 4, 3).count, 6'250);
}

// Predict the class whose own id range holds most of the sample's tokens — a
// fixed bag-of-words linear classifier that text-bag can represent. A sample
// carries 32/8 = 4 own tokens on average and is left without any with
// probability (7/8)^32 ≈ 1.4%; the Zipf background puts only
// (H(50000) - H(25000)) / H(50000) ≈ 0.693 / 11.4 ≈ 6% of its draws in the
// upper half, ≈ 0.34 tokens per sample per class range. So the vote is right
// for well over 90% of samples, against 25% for chance.
TEST(SyntheticText, ATokenCountVoteClassifiesFarAboveChance) {
  const Dataset data = small_default_set(3);
  const int64_t samples = data.test_x.rows();
  int64_t correct = 0;
  for (int64_t i = 0; i < samples; ++i) {
    std::vector<int> votes(kTextClasses, 0);
    for (int64_t t = 0; t < kTextTokensPerSample; ++t) {
      const auto id = static_cast<int64_t>(data.test_x.data[static_cast<size_t>(i * kTextTokensPerSample + t)]);
      for (int64_t c = 0; c < kTextClasses; ++c) {
        const TokenRange r = class_token_range(kTextVocabulary, kTextClasses, c);
        votes[static_cast<size_t>(c)] += id >= r.first && id < r.first + r.count ? 1 : 0;
      }
    }
    int64_t best = 0;
    for (int64_t c = 1; c < kTextClasses; ++c) best = votes[c] > votes[best] ? c : best;
    correct += best == data.test_y[static_cast<size_t>(i)] ? 1 : 0;
  }
  EXPECT_GT(static_cast<double>(correct) / static_cast<double>(samples), 0.9);
}

// Token 0 is the most common word: P = (7/8) / H(50000), H(50000) ≈
// ln 50000 + 0.5772 = 11.397, so 0.0768 of all tokens. Over 2000·32 = 64,000
// tokens the binomial std is ≈ 0.00105, so ±0.005 is beyond 4 std.
TEST(SyntheticText, BackgroundTokensFollowZipf) {
  const Dataset data = small_default_set(5);
  int64_t zeros = 0, ones = 0;
  for (float id : data.train_x.data) {
    zeros += id == 0.0f ? 1 : 0;
    ones += id == 1.0f ? 1 : 0;
  }
  const double n = static_cast<double>(data.train_x.data.size());
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.0768, 0.005);
  // Id 1 half as often as id 0 (1/2 vs 1/1): 0.0384.
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.0384, 0.004);
}

TEST(SyntheticText, LabelsAreSpreadOverAllClasses) {
  const Dataset data = small_default_set(9);
  std::vector<int> counts(kTextClasses, 0);
  for (int32_t label : data.train_y) ++counts[static_cast<size_t>(label)];
  // 500 expected each of 2000; binomial std ≈ 19.4, so 400..600 is beyond 5 std.
  for (int count : counts) EXPECT_TRUE(count > 400 && count < 600) << count;
}

TEST(SyntheticText, RejectsImpossibleArgumentsNamingThem) {
  auto message = [](int64_t vocabulary, int64_t tokens, int64_t classes, int64_t train) -> std::string {
    try {
      make_synthetic_text(vocabulary, tokens, classes, train, 10, 1);
    } catch (const InputError& e) {
      return e.where();
    }
    return "";
  };
  EXPECT_EQ(message(7, 4, 4, 10), "synthetic text: vocabulary");          // fewer than 2·4 ids
  EXPECT_EQ(message(int64_t{1} << 25, 4, 4, 10), "synthetic text: vocabulary");  // not exact in float32
  EXPECT_EQ(message(100, 0, 4, 10), "synthetic text: tokens_per_sample");
  EXPECT_EQ(message(100, 4, 1, 10), "synthetic text: classes");
  EXPECT_EQ(message(100, 4, 4, -1), "synthetic text: train");
}

TEST(SyntheticText, DefaultsMatchTheZooTextBagModel) {
  const Model model = build_zoo_model("text-bag");
  EXPECT_EQ(model.input_shape, std::vector<int64_t>{kTextTokensPerSample});
  ASSERT_FALSE(model.layers.empty());
  EXPECT_EQ(model.layers.front().op, "embedding_bag");
  EXPECT_EQ(model.layers.front().sparse_rows, kTextVocabulary);
  EXPECT_EQ(model.layers.back().output_shape, std::vector<int64_t>{kTextClasses});
}

}  // namespace
}  // namespace trainsim
