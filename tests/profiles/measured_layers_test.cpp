// What the CPU and GPU profilers share about their batch: drawn from the
// given data set (else random ids for a first layer looking rows up), the
// share of a sparse first table its ids touch, and a data set that does not
// fit the model refused naming --dataset.
#include "profiles/profiler/measured_layers.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

// A bag of 3 ids over a 4-row table, then a linear head.
Model tiny_bag() {
  ModelBuilder b("tiny-bag", "test", {3}, 4);
  b.linear("fc", b.embedding_bag("bag", kModelInput, 4, 2), 2);
  return std::move(b).build();
}

TEST(MeasuredBatch, DrawsWholeRowsOfTheDataSetAsSeeded) {
  const Model model = tiny_bag();
  Tensor source({5, 3});  // row r holds r, r, -1: each drawn row is recognisable
  for (int64_t r = 0; r < 5; ++r) source.data.at(static_cast<size_t>(3 * r)) = static_cast<float>(r);
  for (int64_t r = 0; r < 5; ++r) source.data.at(static_cast<size_t>(3 * r + 1)) = static_cast<float>(r);
  for (int64_t r = 0; r < 5; ++r) source.data.at(static_cast<size_t>(3 * r + 2)) = -1.0f;
  MeasureOptions options;
  options.source = &source;
  const Tensor x = measured_batch(model, 40, options);
  ASSERT_EQ(x.shape, (std::vector<int64_t>{40, 3}));
  std::set<float> drawn;
  for (int64_t b = 0; b < 40; ++b) {
    const float r = x.data[static_cast<size_t>(3 * b)];
    EXPECT_EQ(x.data[static_cast<size_t>(3 * b + 1)], r);
    EXPECT_EQ(x.data[static_cast<size_t>(3 * b + 2)], -1.0f);
    drawn.insert(r);
  }
  EXPECT_EQ(drawn.size(), 5u);  // 40 uniform draws of 5 rows miss one with probability < 5·0.8^40 ≈ 7e-4
  EXPECT_EQ(measured_batch(model, 40, options).data, x.data);  // the seed decides
  options.seed = 2;
  EXPECT_NE(measured_batch(model, 40, options).data, x.data);
}

TEST(MeasuredBatch, WithoutADataSetTheIdsAreRowsOfTheTable) {
  const Tensor x = measured_batch(tiny_bag(), 16, MeasureOptions{});
  ASSERT_EQ(x.shape, (std::vector<int64_t>{16, 3}));
  for (const float id : x.data) {
    EXPECT_GE(id, 0.0f);
    EXPECT_LT(id, 4.0f);
    EXPECT_EQ(id, static_cast<float>(static_cast<int64_t>(id)));
  }
}

TEST(MeasuredBatch, ADataSetThatDoesNotFitTheModelNamesTheFlag) {
  Tensor wrong({4, 5});
  MeasureOptions options;
  options.source = &wrong;
  try {
    measured_batch(tiny_bag(), 2, options);
    FAIL() << "a data set of 5-wide rows fed a 3-id bag";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--dataset", 0), 0u) << e.what();
  }
}

TEST(BatchSparsity, IsTheShareOfTheFirstTableTheIdsTouch) {
  const Model model = tiny_bag();
  Tensor x({2, 3});
  x.data = {1, 3, 1, -1, 3, -2};  // rows 1 and 3 of 4; padding touches nothing
  EXPECT_EQ(batch_sparsity(model, x), (std::vector<double>{0.5, 1.0}));
  x.data = {-1, -1, -1, -1, -1, -1};  // nothing touched: one row, the least a profile holds
  EXPECT_EQ(batch_sparsity(model, x), (std::vector<double>{0.25, 1.0}));
  const Model mlp = build_zoo_model("fmnist-mlp");
  const std::vector<double> dense = batch_sparsity(mlp, Tensor({2, 784}));
  EXPECT_EQ(dense, std::vector<double>(mlp.layers.size(), 1.0));
}

}  // namespace
}  // namespace trainsim
