// Shuffling, gathering and splitting of mini-batches.
#include "exec/data/batching.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "exec/data/random_bits.hpp"
#include "model/error.hpp"

namespace trainsim {

std::vector<int64_t> epoch_order(int64_t samples, uint64_t seed, int64_t epoch) {
  TRAINSIM_CHECK(samples >= 0 && epoch >= 0, "epoch_order: negative samples or epoch");
  std::vector<int64_t> order(static_cast<size_t>(samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 rng(mix_seed(seed, static_cast<uint64_t>(epoch)));
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm 3.4.2P): position i takes a
  // uniform pick among positions 0..i, for i from the last down to 1.
  for (int64_t i = samples - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i + 1)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

BatchSampler::BatchSampler(int64_t samples, int64_t batch_size, uint64_t seed)
    : samples_(samples), batch_size_(batch_size), seed_(seed) {
  if (batch_size < 1 || batch_size > samples) {
    throw InputError("batch_size", "is " + std::to_string(batch_size),
                     "between 1 and the " + std::to_string(samples) + " training samples");
  }
}

std::span<const int64_t> BatchSampler::batch(int64_t epoch, int64_t index) {
  TRAINSIM_CHECK(epoch >= 0 && index >= 0 && index < batches_per_epoch(), "BatchSampler: batch out of range");
  if (epoch != cached_epoch_) {
    order_ = epoch_order(samples_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return std::span<const int64_t>(order_).subspan(static_cast<size_t>(index * batch_size_),
                                                  static_cast<size_t>(batch_size_));
}

std::span<const int64_t> BatchSampler::batch_at(int64_t iteration) {
  TRAINSIM_CHECK(iteration >= 0, "BatchSampler: negative iteration");
  return batch(iteration / batches_per_epoch(), iteration % batches_per_epoch());
}

void gather_batch(const Tensor& x, std::span<const int32_t> y, std::span<const int64_t> indices, Tensor& bx,
                  std::vector<int32_t>& by) {
  TRAINSIM_CHECK(!x.shape.empty(), "gather_batch: samples need a first (sample) dimension");
  TRAINSIM_CHECK(x.rows() > 0 && static_cast<int64_t>(y.size()) % x.rows() == 0,
                 "gather_batch: the same number of labels per sample");
  const int64_t row_size = x.row_size();
  const auto per_row = static_cast<int64_t>(y.size()) / x.rows();
  bx.shape = x.shape;
  bx.shape.front() = static_cast<int64_t>(indices.size());
  bx.data.resize(indices.size() * static_cast<size_t>(row_size));
  by.resize(indices.size() * static_cast<size_t>(per_row));
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t row = indices[i];
    TRAINSIM_CHECK(row >= 0 && row < x.rows(), "gather_batch: sample index out of range");
    const auto source = x.data.begin() + row * row_size;
    std::copy(source, source + row_size, bx.data.begin() + static_cast<int64_t>(i) * row_size);
    std::copy_n(y.begin() + row * per_row, per_row, by.begin() + static_cast<int64_t>(i) * per_row);
  }
}

std::vector<RowRange> split_rows(int64_t rows, int64_t parts) {
  TRAINSIM_CHECK(parts >= 1 && rows >= 0, "split_rows: needs parts >= 1 and rows >= 0");
  std::vector<RowRange> ranges;
  int64_t first = 0;
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t count = rows / parts + (p < rows % parts ? 1 : 0);
    ranges.push_back(RowRange{first, count});
    first += count;
  }
  return ranges;
}

std::vector<std::vector<RowRange>> split_global_batch(int64_t batch_rows, int64_t workers, int64_t micro_batches) {
  if (workers < 1 || micro_batches < 1 || batch_rows < workers * micro_batches) {
    throw InputError("batch_size",
                     "is " + std::to_string(batch_rows) + " for " + std::to_string(workers) + " worker(s) x " +
                         std::to_string(micro_batches) + " micro-batch(es)",
                     "at least one sample per micro-batch of every worker");
  }
  std::vector<std::vector<RowRange>> result;
  for (const RowRange& shard : split_rows(batch_rows, workers)) {
    std::vector<RowRange> micro = split_rows(shard.count, micro_batches);
    for (RowRange& m : micro) m.first += shard.first;
    result.push_back(std::move(micro));
  }
  return result;
}

Tensor slice_rows(const Tensor& x, RowRange range) {
  TRAINSIM_CHECK(!x.shape.empty(), "slice_rows: needs a first (sample) dimension");
  TRAINSIM_CHECK(range.first >= 0 && range.count >= 0 && range.first + range.count <= x.rows(),
                 "slice_rows: range outside the tensor");
  Tensor out;
  out.shape = x.shape;
  out.shape.front() = range.count;
  const auto begin = x.data.begin() + range.first * x.row_size();
  out.data.assign(begin, begin + range.count * x.row_size());
  return out;
}

std::vector<int32_t> slice_labels(std::span<const int32_t> y, RowRange range, int64_t per_row) {
  TRAINSIM_CHECK(per_row >= 1 && range.first >= 0 && range.count >= 0 &&
                     (range.first + range.count) * per_row <= static_cast<int64_t>(y.size()),
                 "slice_labels: range outside the labels");
  const auto begin = y.begin() + range.first * per_row;
  return std::vector<int32_t>(begin, begin + range.count * per_row);
}

}  // namespace trainsim
