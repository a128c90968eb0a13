// Batching: per-epoch orders that repeat from (seed, epoch) and are uniform
// permutations, batches that drop the last partial one and run on across
// epochs, gathering rows, and splitting a global batch into worker shards
// and micro-batches.
#include "exec/data/batching.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(EpochOrder, TheSameSeedAndEpochGiveTheSameOrder) {
  EXPECT_EQ(epoch_order(1000, 17, 3), epoch_order(1000, 17, 3));
}

TEST(EpochOrder, DifferentEpochsAndSeedsGiveDifferentOrders) {
  EXPECT_NE(epoch_order(1000, 17, 0), epoch_order(1000, 17, 1));
  EXPECT_NE(epoch_order(1000, 17, 0), epoch_order(1000, 18, 0));
}

TEST(EpochOrder, HoldsEverySampleExactlyOnce) {
  EXPECT_EQ(sorted(epoch_order(1000, 5, 2)), iota_vector(1000));
  EXPECT_TRUE(epoch_order(0, 5, 0).empty());
  EXPECT_EQ(epoch_order(1, 5, 0), std::vector<int64_t>{0});
}

// A uniform shuffle makes each of the 3! = 6 orders of 3 samples equally
// likely: over 6000 epochs 1000 each, binomial std √(6000·(1/6)(5/6)) ≈ 28.9,
// so 850..1150 is beyond 5 std. (A "swap with any position" shuffle would
// give some orders 8/27 · 6000 ≈ 1778 times and fail.)
TEST(EpochOrder, MakesEveryPermutationEquallyLikely) {
  std::map<std::vector<int64_t>, int> counts;
  for (int64_t epoch = 0; epoch < 6000; ++epoch) ++counts[epoch_order(3, 11, epoch)];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) EXPECT_TRUE(count > 850 && count < 1150) << count;
}

TEST(BatchSampler, CoversEverySampleOncePerEpochWhenBatchesDivideIt) {
  BatchSampler sampler(12, 4, 9);
  ASSERT_EQ(sampler.batches_per_epoch(), 3);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t b = 0; b < 3; ++b) {
      const auto batch = sampler.batch(epoch, b);
      EXPECT_EQ(batch.size(), 4u);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    EXPECT_EQ(seen, epoch_order(12, 9, epoch));
    EXPECT_EQ(sorted(seen), iota_vector(12));
  }
}

TEST(BatchSampler, DropsTheLastPartialBatch) {
  // 10 samples in batches of 3: 3 full batches, the 10th sample of the order unused.
  BatchSampler sampler(10, 3, 4);
  EXPECT_EQ(sampler.batches_per_epoch(), 3);
  std::set<int64_t> seen;
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t i : sampler.batch(0, b)) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_EQ(seen.count(epoch_order(10, 4, 0).back()), 0u);
}

TEST(BatchSampler, IterationsRunOnIntoTheNextEpoch) {
  BatchSampler sampler(6, 3, 2);  // 2 batches per epoch
  const std::vector<int64_t> epoch1 = epoch_order(6, 2, 1);
  // Iteration 3 = epoch 1, batch 1: positions 3..5 of epoch 1's order.
  const auto batch = sampler.batch_at(3);
  EXPECT_EQ(std::vector<int64_t>(batch.begin(), batch.end()), std::vector<int64_t>(epoch1.begin() + 3, epoch1.end()));
}

TEST(BatchSampler, RejectsABatchLargerThanTheData) {
  try {
    BatchSampler sampler(10, 11, 1);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "batch_size");
    EXPECT_NE(std::string(e.what()).find("10 training samples"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BatchSampler(10, 0, 1), InputError);
}

TEST(GatherBatch, CopiesTheIndexedRowsAndTheirLabels) {
  // Four samples {1, 2}: sample i holds 2i, 2i+1.
  Tensor x;
  x.shape = {4, 1, 2};
  x.data = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<int32_t> y{10, 11, 12, 13};
  const std::vector<int64_t> indices{2, 0, 2};
  Tensor bx;
  std::vector<int32_t> by;
  gather_batch(x, y, indices, bx, by);
  EXPECT_EQ(bx.shape, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(bx.data, (std::vector<float>{4, 5, 0, 1, 4, 5}));
  EXPECT_EQ(by, (std::vector<int32_t>{12, 10, 12}));
}

TEST(GatherBatch, CopiesEverySamplesLabelsWhenItHasSeveral) {
  // Three sequences of two tokens, a next-token label per token.
  Tensor x;
  x.shape = {3, 2};
  x.data = {0, 1, 2, 3, 4, 5};
  const std::vector<int32_t> y{1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> indices{2, 0};
  Tensor bx;
  std::vector<int32_t> by;
  gather_batch(x, y, indices, bx, by);
  EXPECT_EQ(bx.data, (std::vector<float>{4, 5, 0, 1}));
  EXPECT_EQ(by, (std::vector<int32_t>{5, 6, 1, 2}));
  EXPECT_EQ(slice_labels(y, {1, 2}, 2), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(slice_labels(y, {1, 2}), (std::vector<int32_t>{2, 3}));
}

bool same(const RowRange& a, const RowRange& b) { return a.first == b.first && a.count == b.count; }

TEST(SplitRows, GivesContiguousPartsDifferingByAtMostOneLargerFirst) {
  // 10 = 3 + 3 + 2 + 2.
  const std::vector<RowRange> parts = split_rows(10, 4);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_TRUE(same(parts[0], {0, 3}));
  EXPECT_TRUE(same(parts[1], {3, 3}));
  EXPECT_TRUE(same(parts[2], {6, 2}));
  EXPECT_TRUE(same(parts[3], {8, 2}));
}

TEST(SplitGlobalBatch, SplitsWorkerShardsThenMicroBatchesInGlobalRows) {
  // 10 rows, 2 workers: shards [0, 5) and [5, 10); 2 micro-batches each: 3 + 2.
  const auto split = split_global_batch(10, 2, 2);
  ASSERT_EQ(split.size(), 2u);
  ASSERT_EQ(split[0].size(), 2u);
  EXPECT_TRUE(same(split[0][0], {0, 3}));
  EXPECT_TRUE(same(split[0][1], {3, 2}));
  EXPECT_TRUE(same(split[1][0], {5, 3}));
  EXPECT_TRUE(same(split[1][1], {8, 2}));
}

TEST(SplitGlobalBatch, RejectsAnEmptyMicroBatch) {
  // 2 workers x 4 micro-batches need at least 8 rows.
  EXPECT_THROW(split_global_batch(7, 2, 4), InputError);
  EXPECT_NO_THROW(split_global_batch(8, 2, 4));
  EXPECT_THROW(split_global_batch(8, 0, 1), InputError);
}

TEST(SliceRows, CopiesARangeOfSamplesAndLabels) {
  Tensor x;
  x.shape = {3, 2};
  x.data = {0, 1, 2, 3, 4, 5};
  const Tensor part = slice_rows(x, RowRange{1, 2});
  EXPECT_EQ(part.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(part.data, (std::vector<float>{2, 3, 4, 5}));
  const std::vector<int32_t> y{7, 8, 9};
  EXPECT_EQ(slice_labels(y, RowRange{1, 2}), (std::vector<int32_t>{8, 9}));
}

}  // namespace
}  // namespace trainsim
