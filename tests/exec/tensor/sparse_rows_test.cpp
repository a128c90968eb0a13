// Sparse rows: repeated rows summed in the order they come, part by part,
// a merge leaving nothing behind for the next; distinct rows ascending; an
// embedding bag's rows from its ids and dy.
#include "exec/tensor/sparse_rows.hpp"

#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

TEST(RowMerge, SumsRepeatedRowsInTheOrderTheyCome) {
  // Part 1: rows 4, 1, 4; part 2: rows 1, 0 (width 2). Rows by first
  // appearance 4, 1, 0; row 4 = [1,2] + [5,6], row 1 = [3,4] + [7,8].
  const std::vector<int64_t> rows1{4, 1, 4}, rows2{1, 0};
  const std::vector<float> values1{1, 2, 3, 4, 5, 6}, values2{7, 8, 9, 10};
  const std::vector<RowMerge::Part> parts{{rows1, values1}, {rows2, values2}};
  RowMerge merge;
  merge.merge(parts, 5, 2);
  EXPECT_EQ(merge.rows(), (std::vector<int64_t>{4, 1, 0}));
  EXPECT_EQ(merge.values(), (std::vector<float>{6, 8, 10, 12, 9, 10}));
  const auto row1 = merge.sum_of(1);
  EXPECT_EQ(std::vector<float>(row1.begin(), row1.end()), (std::vector<float>{10, 12}));
  EXPECT_THROW(merge.sum_of(2), InternalError);  // not in this merge
}

TEST(RowMerge, EachMergeStartsFromNothingAndARefusedOneChangesNothing) {
  RowMerge merge;
  const std::vector<int64_t> first{2, 2};
  const std::vector<float> ones{1, 1};
  const std::vector<RowMerge::Part> one{{first, ones}};
  merge.merge(one, 3, 1);
  EXPECT_EQ(merge.values(), (std::vector<float>{2}));
  const std::vector<int64_t> outside{0, 3};
  const std::vector<RowMerge::Part> bad{{outside, ones}};
  EXPECT_THROW(merge.merge(bad, 3, 1), InternalError);
  const std::vector<float> short_values{1};
  const std::vector<RowMerge::Part> ragged{{first, short_values}};
  EXPECT_THROW(merge.merge(ragged, 3, 1), InternalError);
  const std::vector<int64_t> second{0, 2};
  const std::vector<RowMerge::Part> again{{second, ones}};
  merge.merge(again, 3, 1);  // row 2 sums this merge's value only
  EXPECT_EQ(merge.rows(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(merge.values(), (std::vector<float>{1, 1}));
  EXPECT_THROW(merge.sum_of(1), InternalError);
}

TEST(DistinctAscending, DistinctRowsComeAscendingOnceEach) {
  // Across the bitmap's 64-bit words: 0, 63, 64 and 129 of a 130-row table.
  EXPECT_EQ(distinct_ascending(std::vector<int64_t>{129, 64, 0, 63, 64, 129, 0}, 130),
            (std::vector<int64_t>{0, 63, 64, 129}));
  EXPECT_TRUE(distinct_ascending({}, 130).empty());
  EXPECT_THROW(distinct_ascending(std::vector<int64_t>{130}, 130), InternalError);
  EXPECT_THROW(distinct_ascending(std::vector<int64_t>{-1}, 130), InternalError);
}

TEST(SumRows, EachRowOnceWithItsSumAscending) {
  const std::vector<int64_t> rows{7, 2, 7, 5};
  const std::vector<float> values{1, 2, 10, 20, 100, 200, 1000, 2000};  // width 2
  const RowMerge::Part part{rows, values};
  const SummedRows summed = sum_rows(std::span(&part, 1), 10, 2);
  EXPECT_EQ(summed.rows, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(summed.values, (std::vector<float>{10, 20, 1000, 2000, 101, 202}));
}

TEST(BagRows, EachTokensRowTakesItsSamplesDyPaddingSkipped) {
  // Two samples of three tokens; ids 4, -1 (padding), 4 | 0, 2, -1; dy rows
  // [1, 2] and [3, 4]: rows 4, 4, 0, 2 with [1,2], [1,2], [3,4], [3,4],
  // appended after what the gradient held.
  const std::vector<int64_t> ids{4, -1, 4, 0, 2, -1};
  const std::vector<float> dy{1, 2, 3, 4};
  std::vector<int64_t> rows{9};
  std::vector<float> values{7, 7};
  append_bag_rows(ids, dy, 3, 2, rows, values);
  EXPECT_EQ(rows, (std::vector<int64_t>{9, 4, 4, 0, 2}));
  EXPECT_EQ(values, (std::vector<float>{7, 7, 1, 2, 1, 2, 3, 4, 3, 4}));
  append_bag_rows({}, {}, 3, 2, rows, values);  // an empty batch adds nothing
  EXPECT_EQ(rows.size(), 5u);
  EXPECT_THROW(append_bag_rows(ids, std::span(dy).first(2), 3, 2, rows, values), InternalError);
}

TEST(SparseRowsOnTheWire, RoundTripAndAPartialRowIsRefused) {
  const std::vector<int64_t> rows{3, 40000000000};  // an index beyond what a float holds exactly
  const std::vector<float> values{1.5f, -2, 3, 4};
  const std::vector<float> message = encode_sparse_rows(rows, values);
  EXPECT_EQ(message.size(), 2u * 2 + 4);
  const SummedRows back = decode_sparse_rows(message, 2);
  EXPECT_EQ(back.rows, rows);
  EXPECT_EQ(back.values, values);
  EXPECT_TRUE(decode_sparse_rows({}, 2).rows.empty());
  EXPECT_THROW(decode_sparse_rows(std::span(message).first(7), 2), InternalError);
}

}  // namespace
}  // namespace trainsim
