// Softmax cross-entropy and the accuracy count.
#include <gtest/gtest.h>

#include <cmath>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::directional_difference;
using testing_fixtures::dot;
using testing_fixtures::expect_close;
using testing_fixtures::random_tensor;

TEST(SoftmaxCrossEntropy, MatchesAHandComputedBatch) {
  // Row 0: logits [0, 0], label 0: softmax [1/2, 1/2], loss ln 2.
  // Row 1: logits [ln 3, 0], label 1: softmax [3/4, 1/4], loss -ln(1/4) = 2 ln 2.
  // Mean: 1.5 ln 2. dL/dz = (softmax - onehot) / 2:
  // row 0 [-1/4, 1/4], row 1 [3/8, -3/8].
  Tensor logits({2, 2});
  logits.data = {0.0f, 0.0f, static_cast<float>(std::log(3.0)), 0.0f};
  const std::vector<int32_t> labels{0, 1};
  Tensor dlogits;
  const double loss = softmax_cross_entropy(logits, labels, &dlogits);
  EXPECT_NEAR(loss, 1.5 * std::log(2.0), 1e-6);
  ASSERT_EQ(dlogits.shape, logits.shape);
  EXPECT_NEAR(dlogits.data[0], -0.25, 1e-6);
  EXPECT_NEAR(dlogits.data[1], 0.25, 1e-6);
  EXPECT_NEAR(dlogits.data[2], 0.375, 1e-6);
  EXPECT_NEAR(dlogits.data[3], -0.375, 1e-6);
}

TEST(SoftmaxCrossEntropy, StaysFiniteForHugeLogits) {
  // [1000, 0]: label 0 costs log(1 + e^-1000) ≈ 0, label 1 costs ≈ 1000.
  Tensor logits({2, 2});
  logits.data = {1000.0f, 0.0f, 1000.0f, 0.0f};
  const std::vector<int32_t> labels{0, 1};
  Tensor dlogits;
  EXPECT_NEAR(softmax_cross_entropy(logits, labels, &dlogits), 500.0, 1e-9);
  for (float v : dlogits.data) EXPECT_TRUE(std::isfinite(v));
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(21);
  Tensor logits = random_tensor({4, 6}, rng, -3.0f, 3.0f);
  const std::vector<int32_t> labels{0, 5, 2, 2};
  Tensor dlogits;
  softmax_cross_entropy(logits, labels, &dlogits);
  const Tensor v = random_tensor(logits.shape, rng);
  const auto f = [&] { return softmax_cross_entropy(logits, labels, nullptr); };
  expect_close(dot(dlogits, v), directional_difference(f, logits, v, 1e-3), "dL/dlogits");
}

TEST(SoftmaxCrossEntropy, RejectsALabelOutsideTheClasses) {
  Tensor logits({1, 3});
  const std::vector<int32_t> labels{3};
  try {
    softmax_cross_entropy(logits, labels, nullptr);
    FAIL() << "label 3 of 3 classes accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "softmax_cross_entropy: labels[0]");
    EXPECT_EQ(e.problem(), "is 3");
  }
}

TEST(SoftmaxCrossEntropy, RejectsALabelCountOtherThanTheBatch) {
  Tensor logits({2, 3});
  const std::vector<int32_t> labels{1};
  EXPECT_THROW(softmax_cross_entropy(logits, labels, nullptr), InputError);
}

TEST(SoftmaxCrossEntropy, AveragesOverEveryPositionOfASequence) {
  // {1, 2, 2}: the hand batch above as one sample of two positions, a label
  // each (a language model's next tokens): the same loss and gradient.
  Tensor logits({1, 2, 2});
  logits.data = {0.0f, 0.0f, static_cast<float>(std::log(3.0)), 0.0f};
  const std::vector<int32_t> labels{0, 1};
  Tensor dlogits;
  EXPECT_NEAR(softmax_cross_entropy(logits, labels, &dlogits), 1.5 * std::log(2.0), 1e-6);
  EXPECT_EQ(dlogits.shape, logits.shape);
  EXPECT_NEAR(dlogits.data[2], 0.375, 1e-6);
  EXPECT_EQ(count_correct(logits, labels), 1);  // position 0's tie goes to class 0
  const std::vector<int32_t> one_label{0};  // one per sample is not one per position
  EXPECT_THROW(softmax_cross_entropy(logits, one_label, nullptr), InputError);
}

TEST(CountCorrect, CountsRowsWhoseArgMaxIsTheLabelFirstMaxWinningTies) {
  // Rows: argmax 1 (label 1, right), argmax 0 (label 2, wrong),
  // tie [2, 2, 0] -> index 0 (label 0, right).
  Tensor logits({3, 3});
  logits.data = {0, 5, 1, 3, 1, 2, 2, 2, 0};
  const std::vector<int32_t> labels{1, 2, 0};
  EXPECT_EQ(count_correct(logits, labels), 2);
}

}  // namespace
}  // namespace trainsim
