// Rows of a sparse table's gradient: repeated rows summed through a slot per
// table row, and a set of rows made distinct and ascending through a bitmap.
// What SGD's sparse step and Parallax's servers do; and sparse rows on the
// wire (Parallax's ar mode gathers them around the ring).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace trainsim {

// Sums the values of repeated rows: the rows in order of first appearance,
// each row's values added in the order they come (part by part, row by row).
// Its buffers keep their capacity from one merge to the next, so once grown
// a merge allocates nothing (every thread shares one malloc arena,
// memory_reuse.hpp, and allocations of two workers would wait on each
// other). One per thread or per owner; not for concurrent use.
class RowMerge {
 public:
  struct Part {
    std::span<const int64_t> rows;
    std::span<const float> values;  // rows.size() x width
  };

  // Merges `parts` of a table of `table_rows` rows of `width` floats.
  // TRAINSIM_CHECK that every row is in the table and every part holds a
  // row of values per row, all before any is merged.
  void merge(std::span<const Part> parts, int64_t table_rows, int64_t width);

  const std::vector<int64_t>& rows() const { return rows_; }    // the last merge's, distinct
  const std::vector<float>& values() const { return values_; }  // rows().size() x width, their sums
  // The sum of `row` in the last merge, which holds it.
  std::span<const float> sum_of(int64_t row) const;

 private:
  std::vector<int64_t> rows_;
  std::vector<float> values_;
  std::vector<int32_t> slot_of_row_;  // per table row: its index in rows_, or -1
  int64_t width_ = 0;
};

// The distinct values of `ids`, ascending: marked in a bitmap of `limit`
// bits and read back in order, linear in the ids and in limit / 64 (a table's
// rows, where sorting the ids is n log n). TRAINSIM_CHECK that each is in
// [0, limit).
std::vector<int64_t> distinct_ascending(std::span<const int64_t> ids, int64_t limit);

// The rows of `parts` with their values summed: distinct, ascending, each
// with its sum (rows.size() x width values): what a worker sends of its
// sparse gradient, one entry per row it touched.
struct SummedRows {
  std::vector<int64_t> rows;
  std::vector<float> values;
};
SummedRows sum_rows(std::span<const RowMerge::Part> parts, int64_t table_rows, int64_t width);

// An embedding bag's table gradient for one batch (exec/tensor/layers_sparse.cpp):
// for each token (b, t) of `ids` ({batch, tokens}, b-major) that is not
// padding (id < 0), the row id with row b of `dy` ({batch, width}) as its
// values, appended to `rows` and `values` in the batch's order.
// TRAINSIM_CHECK that dy holds a row per sample.
void append_bag_rows(std::span<const int64_t> ids, std::span<const float> dy, int64_t tokens, int64_t width,
                     std::vector<int64_t>& rows, std::vector<float>& values);

// Sparse rows in a float message: the row indices (each int64 in two
// floats' bytes), then their values, rows.size() × width.
std::vector<float> encode_sparse_rows(std::span<const int64_t> rows, std::span<const float> values);
// The inverse, for rows of `width` floats; TRAINSIM_CHECK on a partial row.
SummedRows decode_sparse_rows(std::span<const float> message, int64_t width);

}  // namespace trainsim
