// The messages of Parallax's servers: each part as counts (an int64 in two
// floats' bytes), then its rows, values, wanted rows and dense values; and
// the shares of the rows and dense ranges.
#include <algorithm>
#include <cstring>
#include <string>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/server_state.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
namespace {

constexpr size_t kFloatsPerInt = sizeof(int64_t) / sizeof(float);
static_assert(sizeof(int64_t) == 2 * sizeof(float));

void put_ints(std::vector<float>& out, std::span<const int64_t> ints) {
  const size_t at = out.size();
  out.resize(at + ints.size() * kFloatsPerInt);
  if (!ints.empty()) std::memcpy(out.data() + at, ints.data(), ints.size_bytes());
}

void put_count(std::vector<float>& out, size_t count) {
  const auto n = static_cast<int64_t>(count);
  put_ints(out, std::span<const int64_t>(&n, 1));
}

class Reader {
 public:
  explicit Reader(std::span<const float> message) : message_(message) {}
  int64_t index() {
    int64_t n = 0;
    need(kFloatsPerInt);
    std::memcpy(&n, message_.data() + at_, sizeof n);
    at_ += kFloatsPerInt;
    TRAINSIM_CHECK(n >= 0, "a server message with a negative count");
    return n;
  }
  int64_t count() {
    const int64_t n = index();
    TRAINSIM_CHECK(static_cast<size_t>(n) <= message_.size(), "a server message with a count beyond its end");
    return n;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> out(static_cast<size_t>(count()));
    need(out.size() * kFloatsPerInt);
    if (!out.empty()) std::memcpy(out.data(), message_.data() + at_, out.size() * sizeof(int64_t));
    at_ += out.size() * kFloatsPerInt;
    return out;
  }
  std::vector<float> floats() {
    const auto n = static_cast<size_t>(count());
    need(n);
    std::vector<float> out(message_.begin() + static_cast<std::ptrdiff_t>(at_),
                           message_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return out;
  }
  bool done() const { return at_ == message_.size(); }

 private:
  void need(size_t n) const { TRAINSIM_CHECK(at_ + n <= message_.size(), "a server message ends early"); }
  std::span<const float> message_;
  size_t at_ = 0;
};

}  // namespace

std::vector<float> encode_server_message(const ServerMessage& message) {
  std::vector<float> out;
  for (const ServerPart& part : message) {
    put_count(out, part.rows.size());
    put_ints(out, part.rows);
    put_count(out, part.values.size());
    out.insert(out.end(), part.values.begin(), part.values.end());
    put_count(out, part.wanted.size());
    put_ints(out, part.wanted);
    put_count(out, static_cast<size_t>(part.offset));
    put_count(out, part.dense.size());
    out.insert(out.end(), part.dense.begin(), part.dense.end());
  }
  return out;
}

ServerMessage decode_server_message(std::span<const float> message, size_t variables) {
  Reader in(message);
  ServerMessage out(variables);
  for (ServerPart& part : out) {
    part.rows = in.ints();
    part.values = in.floats();
    part.wanted = in.ints();
    part.offset = in.index();
    part.dense = in.floats();
  }
  TRAINSIM_CHECK(in.done(), "a server message longer than its " + std::to_string(variables) + " variables");
  return out;
}

std::pair<int64_t, int64_t> dense_slice(int64_t floats, int64_t share, int64_t shares) {
  const int64_t first = floats * share / shares;
  return {first, floats * (share + 1) / shares - first};
}

ServerPart share_part(const ServerPart& part, int64_t width, int64_t share, int64_t shares) {
  ServerPart out;
  for (size_t i = 0; i < part.rows.size(); ++i) {
    if (share_of_row(part.rows[i], shares) != share) continue;
    out.rows.push_back(part.rows[i]);
    const auto from = part.values.begin() + static_cast<std::ptrdiff_t>(i) * width;
    out.values.insert(out.values.end(), from, from + width);
  }
  std::copy_if(part.wanted.begin(), part.wanted.end(), std::back_inserter(out.wanted),
               [&](int64_t row) { return share_of_row(row, shares) == share; });
  if (!part.dense.empty()) {
    const auto [first, count] = dense_slice(static_cast<int64_t>(part.dense.size()), share, shares);
    out.offset = first;
    out.dense.assign(part.dense.begin() + first, part.dense.begin() + first + count);
  }
  return out;
}

std::vector<float> rows_of_table(std::span<const float> table, std::span<const int64_t> rows, int64_t width) {
  std::vector<float> values;
  values.reserve(rows.size() * static_cast<size_t>(width));
  for (const int64_t row : rows) {
    const auto from = table.begin() + row * width;
    values.insert(values.end(), from, from + width);
  }
  return values;
}

void put_rows(std::span<float> table, std::span<const int64_t> rows, std::span<const float> values, int64_t width) {
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(r) * width, width, table.begin() + rows[r] * width);
  }
}

ServerPart dense_share(const Weights& weights, const ServedVariable& var, int64_t share, int64_t shares) {
  const std::vector<float> flat = flatten_weights(weights, var.first, var.last);
  const auto [first, count] = dense_slice(var.floats, share, shares);
  ServerPart part;
  part.offset = first;
  part.dense.assign(flat.begin() + first, flat.begin() + first + count);
  return part;
}

}  // namespace trainsim::interp
