// A synchronous parameter-server shard over a Transport: the device server of
// dp-ps (seed 003 §2.3) and Parallax's sparse servers (seed 004, docs/equations.md
// §3). Each round, every worker pushes its gradient for the shard; the server
// sums the pushes in worker order, applies the update callback once, then
// answers every worker's pull. The shard is one variable, or a key range of one.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "exec/tensor/sparse_rows.hpp"
#include "exec/transport/transport.hpp"

namespace trainsim {

// Sparse rows on the wire, as a push carries them: the row indices (each
// int64 in two floats' bytes), then their values, rows.size() × width.
std::vector<float> encode_sparse_rows(std::span<const int64_t> rows, std::span<const float> values);

struct SparseRows {
  std::vector<int64_t> rows;
  std::vector<float> values;  // rows.size() × width
};
// The inverse, for rows of `width` floats; TRAINSIM_CHECK on a partial row.
SparseRows decode_sparse_rows(std::span<const float> message, int64_t width);

struct ShardShape {
  int64_t rows = 0;        // e.g. an embedding table's rows in this shard; 1 for a flat dense range
  int64_t row_floats = 0;  // values per row
  bool sparse = false;     // pushes carry the touched rows only; pulls ask for rows

  int64_t floats() const { return rows * row_floats; }
};

// What the update callback sees once per round: `gradient` is the sum of the
// round's pushes for `rows` (ascending, distinct; every row of a dense shard),
// rows.size() × row_floats values; `weights` is the whole shard, row-major.
struct ShardUpdate {
  std::span<float> weights;
  std::span<const int64_t> rows;
  std::span<const float> gradient;
  int64_t row_floats = 0;
};
using ShardUpdateFn = std::function<void(const ShardUpdate&)>;

// The server side; its methods run on the server worker's thread.
class ParamServerShard {
 public:
  // `workers`: who pushes and pulls each round (not `server`); `weights`: the
  // shard's initial values, shape.floats() of them.
  ParamServerShard(Transport& transport, int server, std::vector<int> workers, ShardShape shape,
                   std::vector<float> weights, ShardUpdateFn update);

  // One round under `tag`: waits for a push from every worker, sums them
  // (worker order, then push order: the same bits every run), updates, and
  // answers each worker's pull.
  void serve_round(int64_t tag);

  const std::vector<float>& weights() const { return weights_; }
  // Replaces the shard's values (a checkpoint's), shape().floats() of them.
  void set_weights(std::vector<float> weights);
  const ShardShape& shape() const { return shape_; }

 private:
  void update_dense(int64_t tag);
  void update_sparse(int64_t tag);
  void answer_pulls(int64_t tag);

  Transport& transport_;
  int server_;
  std::vector<int> workers_;
  ShardShape shape_;
  std::vector<float> weights_;
  ShardUpdateFn update_;
  RowMerge merge_;  // a sparse round's pushes, summed by row
};

// A worker's side: per round one push, then one pull, under the round's tag.
// Messages: a dense push is the gradient; a sparse push is the rows (each
// int64 as two floats' worth of bytes) then their values; a sparse pull sends
// the wanted rows the same way and gets their values back.
class ParamServerClient {
 public:
  ParamServerClient(Transport& transport, int self, int server, ShardShape shape);

  // Dense shard: shape.floats() gradient values.
  void push(int64_t tag, std::span<const float> gradient);
  // Sparse shard: values row i (row_floats of them) belongs to table row
  // rows[i]; rows may repeat (their values add) and may be empty.
  void push_rows(int64_t tag, std::span<const int64_t> rows, std::span<const float> values);
  // Dense shard: every value after the round's update.
  std::vector<float> pull(int64_t tag);
  // Sparse shard: rows.size() × row_floats values after the round's update.
  std::vector<float> pull_rows(int64_t tag, std::span<const int64_t> rows);
  // The same pull in two halves: the request may go before the round's
  // update (after the push: the server answers once it has stepped), the
  // values are taken after it (`count` rows, as requested).
  void request_rows(int64_t tag, std::span<const int64_t> rows);
  std::vector<float> take_rows(int64_t tag, size_t count);

 private:
  Transport& transport_;
  int self_;
  int server_;
  ShardShape shape_;
};

}  // namespace trainsim
