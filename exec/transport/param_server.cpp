// ParamServerShard and ParamServerClient: the push / update / pull round and
// its messages (row indices travel as the bytes of int64 values).
#include "exec/transport/param_server.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr int64_t kFloatsPerRow = static_cast<int64_t>(sizeof(int64_t) / sizeof(float));  // an index's size in floats
static_assert(sizeof(int64_t) == 2 * sizeof(float));

std::vector<float> encode_rows(std::span<const int64_t> rows, int64_t extra_floats) {
  std::vector<float> message(rows.size() * kFloatsPerRow + static_cast<size_t>(extra_floats));
  if (!rows.empty()) std::memcpy(message.data(), rows.data(), rows.size_bytes());
  return message;
}

std::vector<int64_t> decode_rows(const std::vector<float>& message, int64_t count) {
  std::vector<int64_t> rows(static_cast<size_t>(count));
  if (count > 0) std::memcpy(rows.data(), message.data(), rows.size() * sizeof(int64_t));
  return rows;
}

void check_rows(std::span<const int64_t> rows, const ShardShape& shape, const char* where) {
  for (int64_t row : rows) {
    TRAINSIM_CHECK(row >= 0 && row < shape.rows, std::string(where) + ": row " + std::to_string(row) +
                                                     " is outside the shard's 0.." + std::to_string(shape.rows - 1));
  }
}

}  // namespace

std::vector<float> encode_sparse_rows(std::span<const int64_t> rows, std::span<const float> values) {
  std::vector<float> message = encode_rows(rows, static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), message.begin() + static_cast<int64_t>(rows.size()) * kFloatsPerRow);
  return message;
}

SparseRows decode_sparse_rows(std::span<const float> message, int64_t width) {
  const auto size = static_cast<int64_t>(message.size());
  TRAINSIM_CHECK(width >= 1 && size % (kFloatsPerRow + width) == 0, "sparse rows with a partial row");
  const int64_t count = size / (kFloatsPerRow + width);
  SparseRows out;
  out.rows.resize(static_cast<size_t>(count));
  if (count > 0) std::memcpy(out.rows.data(), message.data(), out.rows.size() * sizeof(int64_t));
  out.values.assign(message.begin() + count * kFloatsPerRow, message.end());
  return out;
}

ParamServerShard::ParamServerShard(Transport& transport, int server, std::vector<int> workers, ShardShape shape,
                                   std::vector<float> weights, ShardUpdateFn update)
    : transport_(transport),
      server_(server),
      workers_(std::move(workers)),
      shape_(shape),
      weights_(std::move(weights)),
      update_(std::move(update)) {
  TRAINSIM_CHECK(shape.rows >= 0 && shape.row_floats >= 1, "ParamServerShard: a shard needs row_floats >= 1");
  TRAINSIM_CHECK(static_cast<int64_t>(weights_.size()) == shape.floats(),
                 "ParamServerShard: " + std::to_string(weights_.size()) + " initial values for a shard of " +
                     std::to_string(shape.floats()));
  TRAINSIM_CHECK(!workers_.empty(), "ParamServerShard: a shard needs workers");
  TRAINSIM_CHECK(std::find(workers_.begin(), workers_.end(), server) == workers_.end(),
                 "ParamServerShard: the server is not one of its own workers");
  TRAINSIM_CHECK(static_cast<bool>(update_), "ParamServerShard: needs an update callback");
}

void ParamServerShard::set_weights(std::vector<float> weights) {
  TRAINSIM_CHECK(static_cast<int64_t>(weights.size()) == shape_.floats(),
                 "ParamServerShard: " + std::to_string(weights.size()) + " values for a shard of " +
                     std::to_string(shape_.floats()));
  weights_ = std::move(weights);
}

void ParamServerShard::serve_round(int64_t tag) {
  if (shape_.sparse) {
    update_sparse(tag);
  } else {
    update_dense(tag);
  }
  answer_pulls(tag);
}

void ParamServerShard::update_dense(int64_t tag) {
  std::vector<float> sum;
  for (int worker : workers_) {
    std::vector<float> push = transport_.recv(server_, worker, tag);
    TRAINSIM_CHECK(static_cast<int64_t>(push.size()) == shape_.floats(),
                   "ParamServerShard: worker " + std::to_string(worker) + " pushed " + std::to_string(push.size()) +
                       " values to a shard of " + std::to_string(shape_.floats()));
    if (sum.empty()) {
      sum = std::move(push);
    } else {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + push[i];
    }
  }
  std::vector<int64_t> rows(static_cast<size_t>(shape_.rows));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  update_(ShardUpdate{weights_, rows, sum, shape_.row_floats});
}

void ParamServerShard::update_sparse(int64_t tag) {
  const auto width = static_cast<size_t>(shape_.row_floats);
  std::vector<SparseRows> pushes;
  pushes.reserve(workers_.size());
  for (int worker : workers_) {
    pushes.push_back(decode_sparse_rows(transport_.recv(server_, worker, tag), shape_.row_floats));
    check_rows(pushes.back().rows, shape_, "ParamServerShard");
  }
  // Each row's values summed in worker order, then push order; then the
  // distinct rows ascending, each with its sum: linear in the pushed rows,
  // where sorting them was n log n.
  std::vector<RowMerge::Part> parts;
  for (const SparseRows& push : pushes) parts.push_back({push.rows, push.values});
  merge_.merge(parts, shape_.rows, shape_.row_floats);
  const std::vector<int64_t> rows = distinct_ascending(merge_.rows(), shape_.rows);
  std::vector<float> gradient(rows.size() * width);
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::span<const float> sum = merge_.sum_of(rows[r]);
    std::copy(sum.begin(), sum.end(), gradient.begin() + static_cast<std::ptrdiff_t>(r * width));
  }
  update_(ShardUpdate{weights_, rows, gradient, shape_.row_floats});
}

void ParamServerShard::answer_pulls(int64_t tag) {
  for (int worker : workers_) {
    if (!shape_.sparse) {
      transport_.send(server_, worker, tag, weights_);
      continue;
    }
    const std::vector<float> request = transport_.recv(server_, worker, tag);
    TRAINSIM_CHECK(static_cast<int64_t>(request.size()) % kFloatsPerRow == 0,
                   "ParamServerShard: a pull request of " + std::to_string(request.size()) + " floats");
    const std::vector<int64_t> rows = decode_rows(request, static_cast<int64_t>(request.size()) / kFloatsPerRow);
    check_rows(rows, shape_, "ParamServerShard pull");
    std::vector<float> reply;
    reply.reserve(rows.size() * static_cast<size_t>(shape_.row_floats));
    for (int64_t row : rows) {
      const auto first = weights_.begin() + row * shape_.row_floats;
      reply.insert(reply.end(), first, first + shape_.row_floats);
    }
    transport_.send(server_, worker, tag, std::move(reply));
  }
}

ParamServerClient::ParamServerClient(Transport& transport, int self, int server, ShardShape shape)
    : transport_(transport), self_(self), server_(server), shape_(shape) {
  TRAINSIM_CHECK(self != server, "ParamServerClient: a worker does not push to itself");
}

void ParamServerClient::push(int64_t tag, std::span<const float> gradient) {
  TRAINSIM_CHECK(!shape_.sparse, "ParamServerClient: a sparse shard takes push_rows");
  TRAINSIM_CHECK(static_cast<int64_t>(gradient.size()) == shape_.floats(),
                 "ParamServerClient: a push of " + std::to_string(gradient.size()) + " values to a shard of " +
                     std::to_string(shape_.floats()));
  transport_.send(self_, server_, tag, std::vector<float>(gradient.begin(), gradient.end()));
}

void ParamServerClient::push_rows(int64_t tag, std::span<const int64_t> rows, std::span<const float> values) {
  TRAINSIM_CHECK(shape_.sparse, "ParamServerClient: a dense shard takes push");
  TRAINSIM_CHECK(static_cast<int64_t>(values.size()) == static_cast<int64_t>(rows.size()) * shape_.row_floats,
                 "ParamServerClient: " + std::to_string(values.size()) + " values for " + std::to_string(rows.size()) +
                     " rows of " + std::to_string(shape_.row_floats));
  check_rows(rows, shape_, "ParamServerClient");
  transport_.send(self_, server_, tag, encode_sparse_rows(rows, values));
}

std::vector<float> ParamServerClient::pull(int64_t tag) {
  TRAINSIM_CHECK(!shape_.sparse, "ParamServerClient: a sparse shard takes pull_rows");
  return transport_.recv(self_, server_, tag);
}

std::vector<float> ParamServerClient::pull_rows(int64_t tag, std::span<const int64_t> rows) {
  request_rows(tag, rows);
  return take_rows(tag, rows.size());
}

void ParamServerClient::request_rows(int64_t tag, std::span<const int64_t> rows) {
  TRAINSIM_CHECK(shape_.sparse, "ParamServerClient: a dense shard takes pull");
  check_rows(rows, shape_, "ParamServerClient");
  transport_.send(self_, server_, tag, encode_rows(rows, 0));
}

std::vector<float> ParamServerClient::take_rows(int64_t tag, size_t count) {
  std::vector<float> values = transport_.recv(self_, server_, tag);
  TRAINSIM_CHECK(values.size() == count * static_cast<size_t>(shape_.row_floats),
                 "ParamServerClient: " + std::to_string(values.size()) + " values for " + std::to_string(count) +
                     " rows of " + std::to_string(shape_.row_floats));
  return values;
}

}  // namespace trainsim
