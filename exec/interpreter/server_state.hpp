// Parallax's parameter servers as the interpreter holds them (seed 004 §3,
// docs/equations.md §3): one server per machine, in the process of the
// machine's first worker, each owning a share of every served variable
// (table rows r with r mod m = j, and the j-th of m slices of a dense
// range), and the messages that carry pushes and pulls between workers,
// hosts and servers. Private to exec/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/tensor.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim::interp {

// One served variable's part of a message. A push: a sparse table's
// gradient rows and their values, the rows the sender's next forward reads
// (`wanted`); a dense range's gradient values from `offset`. A pull: rows
// and their new values; new dense values from `offset`.
struct ServerPart {
  std::vector<int64_t> rows;
  std::vector<float> values;  // rows.size() x the table's width
  std::vector<int64_t> wanted;
  int64_t offset = 0;
  std::vector<float> dense;
};
using ServerMessage = std::vector<ServerPart>;  // per served variable, in the plan's order

std::vector<float> encode_server_message(const ServerMessage& message);
// TRAINSIM_CHECK on a message of another shape than `variables` parts.
ServerMessage decode_server_message(std::span<const float> message, size_t variables);

// Which of `shares` servers owns a row, and the slice of a dense range of
// `floats` values share `share` owns: [first, first + count).
inline int64_t share_of_row(int64_t row, int64_t shares) { return row % shares; }
std::pair<int64_t, int64_t> dense_slice(int64_t floats, int64_t share, int64_t shares);

// `part` restricted to share `share` of `shares`: its rows (and values) and
// wanted rows of that share, and the share's slice of a whole dense range.
ServerPart share_part(const ServerPart& part, int64_t width, int64_t share, int64_t shares);

// The values of `rows` of a table of `width`-wide rows, one row after another.
std::vector<float> rows_of_table(std::span<const float> table, std::span<const int64_t> rows, int64_t width);
// `values` (rows.size() x width) written into those rows of the table.
void put_rows(std::span<float> table, std::span<const int64_t> rows, std::span<const float> values, int64_t width);

// A variable the servers step: one sparse table (layer `first`), or dense layers.
struct ServedVariable {
  int32_t first = 0;
  int32_t last = 0;
  bool sparse = false;
  int64_t rows = 0;    // sparse: the table's rows
  int64_t width = 0;   // sparse: values per row
  int64_t floats = 0;  // dense: values of layers [first, last]
};

// Machine `share`'s server and host memory, in the process of its worker
// `worker`; every field under `mu`.
struct MachineServer {
  int32_t share = 0;
  int32_t worker = 0;
  // Per served variable: its optimizer, and layers 0..last of the weights (a
  // dense step needs every shape), current where this server owns them and,
  // on its host, where the machine's workers pulled rows.
  std::vector<std::unique_ptr<Sgd>> optimizers;
  std::vector<Weights> tables;
  std::map<OpId, ServerMessage> copies;   // a worker's copy to host memory, by its op
  std::map<OpId, ServerMessage> arrived;  // a push a recv at this server brought, by the recv
  std::map<int32_t, ServerMessage> aggregate;  // per iteration: the machine's rows summed (local aggregation)
  std::map<int32_t, bool> gathered;            // per iteration: every copy is here
  // (iteration, worker): the rows it wants, all shares (from its copy).
  std::map<std::pair<int32_t, int32_t>, std::vector<int64_t>> host_wanted;
  // (iteration, sender of a push): per variable, the rows of this share it wants back.
  std::map<std::pair<int32_t, int32_t>, std::vector<std::vector<int64_t>>> wanted;
  std::mutex mu;
  std::mutex gather_mu;  // held while the copies of other processes' workers arrive
};

// Slice `share` of `shares` of a dense variable's values in `weights`, as
// a pull's part (its offset and values).
ServerPart dense_share(const Weights& weights, const ServedVariable& var, int64_t share, int64_t shares);

}  // namespace trainsim::interp
