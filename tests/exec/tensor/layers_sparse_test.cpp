// Embedding-bag: sums of table rows, padding, repeated ids, the sparse
// gradient and bad ids.
#include <gtest/gtest.h>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::expect_layer_gradients;
using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

// Table {5, 2}: row r = [r, 10·r].
LayerParams table_5x2() {
  Tensor table({5, 2});
  for (int r = 0; r < 5; ++r) table.data[2 * r] = static_cast<float>(r), table.data[2 * r + 1] = 10.0f * r;
  return {table};
}

Tensor ids(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(std::move(shape));
  t.data = std::move(values);
  return t;
}

TEST(EmbeddingBag, SumsLookedUpRowsSkippingPaddingAndCountingRepeats) {
  // Sample 0 ids [1, 1, -1, 3]: row1 + row1 + row3 = [1+1+3, 10+10+30] = [5, 50].
  // Sample 1 all padding: [0, 0].
  const auto bag = make_embedding_bag("bag", 5, 2);
  LayerCache cache;
  const Tensor y = bag->forward(table_5x2(), ids({2, 4}, {1, 1, -1, 3, -1, -1, -1, -1}), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{5, 50, 0, 0}));
}

TEST(EmbeddingBag, GradientKeepsOneSparseRowPerLookedUpToken) {
  // dy = [[1, 2], [7, 8]]: sample 0 looked up 1, 1, 3, so rows [1, 1, 3] each
  // carry [1, 2]; sample 1 (padding only) adds nothing. dx (ids) is zero.
  const auto bag = make_embedding_bag("bag", 5, 2);
  EXPECT_TRUE(bag->sparse());
  const LayerParams table = table_5x2();
  LayerCache cache;
  const Tensor x = ids({2, 4}, {1, 1, -1, 3, -1, -1, -1, -1});
  bag->forward(table, x, cache);
  LayerGrads grads = zero_layer_grads(*bag, table);
  const Tensor dx = bag->backward(table, ids({2, 2}, {1, 2, 7, 8}), cache, grads);
  EXPECT_EQ(dx.shape, x.shape);
  for (float v : dx.data) EXPECT_EQ(v, 0.0f);
  ASSERT_TRUE(grads[0].sparse);
  EXPECT_EQ(grads[0].rows, (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(grads[0].row_values.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(grads[0].row_values.data, (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(EmbeddingBag, TableGradientMatchesFiniteDifferencesWithRepeatsAndPadding) {
  std::mt19937_64 rng(31);
  const auto bag = make_embedding_bag("bag", 6, 3);
  LayerParams table;
  bag->init_params(table, rng);
  const Tensor x = ids({3, 5}, {0, 2, 2, -1, 5, 4, 4, 4, 1, -1, -1, -1, -1, -1, 3});
  expect_layer_gradients(*bag, table, x, 32, 1e-2, /*check_input=*/false);
}

TEST(EmbeddingBag, RejectsIdsOutsideTheVocabularyOrNotIntegers) {
  const auto bag = make_embedding_bag("text: layers[0] 'embedding'", 5, 2);
  LayerCache cache;
  try {
    bag->forward(table_5x2(), ids({1, 2}, {0, 5}), cache);
    FAIL() << "id 5 of a 5-row table accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "text: layers[0] 'embedding': input[0][1]");
    EXPECT_EQ(e.problem(), "token id 5");
  }
  EXPECT_THROW(bag->forward(table_5x2(), ids({1, 1}, {1.5f}), cache), InputError);
}

}  // namespace
}  // namespace trainsim
