// Mini-batches: a per-epoch shuffled sample order that repeats exactly from
// (seed, epoch), gathering a batch's rows, and splitting one global batch
// into per-worker shards and micro-batches for the plan interpreter.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/tensor/tensor.hpp"

namespace trainsim {

// A permutation of 0..samples-1: Fisher-Yates over the bits of
// std::mt19937_64(mix_seed(seed, epoch)) (random_bits.hpp), so the same
// (seed, epoch) gives the same order with every standard library.
std::vector<int64_t> epoch_order(int64_t samples, uint64_t seed, int64_t epoch);

// Batches of `batch_size` sample indices, epoch after epoch, each epoch in its
// own epoch_order. An epoch has floor(samples / batch_size) batches: the last
// partial batch is dropped, so every step trains on a full batch (the
// strategies' per-step costs and the data-parallel equivalence assume it); the
// dropped samples change from epoch to epoch with the order.
class BatchSampler {
 public:
  // InputError naming "batch_size" unless 1 <= batch_size <= samples.
  BatchSampler(int64_t samples, int64_t batch_size, uint64_t seed);

  int64_t batch_size() const { return batch_size_; }
  int64_t batches_per_epoch() const { return samples_ / batch_size_; }

  // Batch `index` (0 <= index < batches_per_epoch()) of `epoch` (>= 0). The
  // span stays valid until the next call for another epoch; not thread-safe.
  std::span<const int64_t> batch(int64_t epoch, int64_t index);
  // Batch number `iteration` counted across epochs (iteration >= 0).
  std::span<const int64_t> batch_at(int64_t iteration);

 private:
  int64_t samples_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;  // epoch_order(samples_, seed_, cached_epoch_)
};

// bx = the rows of `x` at `indices` (shape {indices.size(), sample shape...}),
// by = their labels (each sample has y.size() / x.rows() of them: one for a
// class, one per position for a sequence). Reuses bx's and by's storage.
void gather_batch(const Tensor& x, std::span<const int32_t> y, std::span<const int64_t> indices, Tensor& bx,
                  std::vector<int32_t>& by);

// Rows [first, first + count) of a batch.
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
};

// `rows` split into `parts` (>= 1) contiguous ranges in order, sizes differing
// by at most one, the larger first (10 into 4: 3, 3, 2, 2). A part's mean-loss
// gradient weighted by count / rows adds up to the whole batch's.
std::vector<RowRange> split_rows(int64_t rows, int64_t parts);

// One global batch of `batch_rows` rows: worker w's shard is split_rows(batch,
// workers)[w], and its micro-batch m is the m-th of split_rows(shard,
// micro_batches), given as rows of the global batch: result[w][m]. InputError
// naming "batch_size" if batch_rows < workers·micro_batches (an empty
// micro-batch), or workers or micro_batches is < 1.
std::vector<std::vector<RowRange>> split_global_batch(int64_t batch_rows, int64_t workers, int64_t micro_batches);

// Rows `range` of `x` (a copy, shape {range.count, sample shape...}) and the
// labels of those rows in `y`, `per_row` labels a row.
Tensor slice_rows(const Tensor& x, RowRange range);
std::vector<int32_t> slice_labels(std::span<const int32_t> y, RowRange range, int64_t per_row = 1);

}  // namespace trainsim
