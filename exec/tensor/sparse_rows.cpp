// RowMerge, distinct_ascending, sum_rows and the rows' wire format (see the header).
#include "exec/tensor/sparse_rows.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "model/error.hpp"

namespace trainsim {

void RowMerge::merge(std::span<const Part> parts, int64_t table_rows, int64_t width) {
  TRAINSIM_CHECK(width >= 0 && table_rows >= 0, "a table of negative size");
  TRAINSIM_CHECK(table_rows <= std::numeric_limits<int32_t>::max(), "sparse table of over 2^31 rows");
  size_t pushed = 0;
  for (const Part& part : parts) {
    TRAINSIM_CHECK(part.values.size() == part.rows.size() * static_cast<size_t>(width),
                   "sparse gradient holds " + std::to_string(part.values.size()) + " values for " +
                       std::to_string(part.rows.size()) + " rows of width " + std::to_string(width));
    for (const int64_t row : part.rows) {
      TRAINSIM_CHECK(row >= 0 && row < table_rows,
                     "sparse row " + std::to_string(row) + " outside a table of " + std::to_string(table_rows));
    }
    pushed += part.rows.size();
  }
  TRAINSIM_CHECK(pushed <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "over 2^31 rows in one merge");
  for (const int64_t row : rows_) slot_of_row_[static_cast<size_t>(row)] = -1;  // the last merge's
  if (static_cast<int64_t>(slot_of_row_.size()) < table_rows) slot_of_row_.assign(static_cast<size_t>(table_rows), -1);
  rows_.clear();
  values_.clear();
  width_ = width;
  const auto w = static_cast<size_t>(width);
  for (const Part& part : parts) {
    for (size_t i = 0; i < part.rows.size(); ++i) {
      int32_t& slot = slot_of_row_[static_cast<size_t>(part.rows[i])];
      if (slot < 0) {
        slot = static_cast<int32_t>(rows_.size());
        rows_.push_back(part.rows[i]);
        values_.resize(values_.size() + w, 0.0f);
      }
      float* out = values_.data() + static_cast<size_t>(slot) * w;
      const float* in = part.values.data() + i * w;
      for (size_t j = 0; j < w; ++j) out[j] += in[j];
    }
  }
}

std::span<const float> RowMerge::sum_of(int64_t row) const {
  TRAINSIM_CHECK(row >= 0 && row < static_cast<int64_t>(slot_of_row_.size()) &&
                     slot_of_row_[static_cast<size_t>(row)] >= 0,
                 "row " + std::to_string(row) + " is not in the last merge");
  const auto w = static_cast<size_t>(width_);
  return std::span<const float>(values_).subspan(static_cast<size_t>(slot_of_row_[static_cast<size_t>(row)]) * w, w);
}

std::vector<int64_t> distinct_ascending(std::span<const int64_t> ids, int64_t limit) {
  TRAINSIM_CHECK(limit >= 0, "a negative row count");
  std::vector<uint64_t> bits(static_cast<size_t>((limit + 63) / 64), 0);
  size_t marked = 0;
  for (const int64_t id : ids) {
    TRAINSIM_CHECK(id >= 0 && id < limit, "row " + std::to_string(id) + " outside 0.." + std::to_string(limit - 1));
    uint64_t& word = bits[static_cast<size_t>(id) / 64];
    const uint64_t bit = uint64_t{1} << (id % 64);
    marked += (word & bit) == 0;
    word |= bit;
  }
  std::vector<int64_t> distinct;
  distinct.reserve(marked);
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
      distinct.push_back(static_cast<int64_t>(w * 64) + std::countr_zero(word));
    }
  }
  return distinct;
}

SummedRows sum_rows(std::span<const RowMerge::Part> parts, int64_t table_rows, int64_t width) {
  thread_local RowMerge merge;
  merge.merge(parts, table_rows, width);
  SummedRows out;
  out.rows = distinct_ascending(merge.rows(), table_rows);
  out.values.reserve(out.rows.size() * static_cast<size_t>(width));
  for (const int64_t row : out.rows) {
    const std::span<const float> sum = merge.sum_of(row);
    out.values.insert(out.values.end(), sum.begin(), sum.end());
  }
  return out;
}

namespace {

constexpr size_t kFloatsPerIndex = sizeof(int64_t) / sizeof(float);
static_assert(sizeof(int64_t) == 2 * sizeof(float));

}  // namespace

void append_bag_rows(std::span<const int64_t> ids, std::span<const float> dy, int64_t tokens, int64_t width,
                     std::vector<int64_t>& rows, std::vector<float>& values) {
  if (ids.empty()) return;  // no sample, or samples of no token
  TRAINSIM_CHECK(tokens > 0 && width > 0 && ids.size() % static_cast<size_t>(tokens) == 0 &&
                     dy.size() == ids.size() / static_cast<size_t>(tokens) * static_cast<size_t>(width),
                 "an embedding bag's dy holds a row per sample");
  // Grown geometrically: micro-batch after micro-batch append into one set.
  if (rows.capacity() < rows.size() + ids.size()) rows.reserve(std::max(2 * rows.capacity(), rows.size() + ids.size()));
  const size_t more = ids.size() * static_cast<size_t>(width);
  if (values.capacity() < values.size() + more) values.reserve(std::max(2 * values.capacity(), values.size() + more));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;
    rows.push_back(ids[i]);
    const auto b = static_cast<std::ptrdiff_t>(i / static_cast<size_t>(tokens));
    values.insert(values.end(), dy.begin() + b * width, dy.begin() + (b + 1) * width);
  }
}

std::vector<float> encode_sparse_rows(std::span<const int64_t> rows, std::span<const float> values) {
  std::vector<float> message(rows.size() * kFloatsPerIndex + values.size());
  if (!rows.empty()) std::memcpy(message.data(), rows.data(), rows.size_bytes());
  std::copy(values.begin(), values.end(), message.begin() + static_cast<std::ptrdiff_t>(rows.size() * kFloatsPerIndex));
  return message;
}

SummedRows decode_sparse_rows(std::span<const float> message, int64_t width) {
  TRAINSIM_CHECK(width >= 1 && message.size() % (kFloatsPerIndex + static_cast<size_t>(width)) == 0,
                 "sparse rows with a partial row");
  const size_t count = message.size() / (kFloatsPerIndex + static_cast<size_t>(width));
  SummedRows out;
  out.rows.resize(count);
  if (count > 0) std::memcpy(out.rows.data(), message.data(), count * sizeof(int64_t));
  out.values.assign(message.begin() + static_cast<std::ptrdiff_t>(count * kFloatsPerIndex), message.end());
  return out;
}

}  // namespace trainsim
