// Host ops: CGDP's copies to the host, their accumulation there and the
// copies back; and the plan's parameter servers (Parallax), which the same
// copy ops push to and pull from.
#include <algorithm>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/optim/host_accumulate.hpp"
#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
namespace {

// Shards per round in a server round's tag.
constexpr int64_t kShardsPerRound = 1024;

}  // namespace

// Host memory is a machine's, held by the process of the worker whose op
// accumulates there: a copy from a worker of another process comes as a
// message, and so does the sum going back.
void Interpreter::link_host_ops() {
  host_source_.assign(plan_.ops.size(), -1);
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    const Op& op = plan_.ops[id];
    for (const OpId dep : op.deps) {
      const Op& from = plan_.ops[static_cast<size_t>(dep)];
      const bool copy_in = op.kind == OpKind::kHostAccumulate && from.kind == OpKind::kCopyToHost;
      const bool reduce = op.kind == OpKind::kAllReduce && from.kind == OpKind::kHostAccumulate;
      const bool copy_back = op.kind == OpKind::kCopyToDevice &&
                             (from.kind == OpKind::kHostAccumulate || host_source_[static_cast<size_t>(dep)] >= 0);
      if (copy_in) host_source_[static_cast<size_t>(dep)] = static_cast<OpId>(id);
      if (reduce || copy_back) host_source_[id] = dep;
      if (copy_back) host_readers_[dep].push_back(static_cast<OpId>(id));
    }
  }
}

// The accumulation whose buffer a host op (the hosts' AllReduce, a copy
// back) reads: its source, or its source's.
OpId Interpreter::accumulation_of(OpId host_op) const {
  const OpId source = host_source_[static_cast<size_t>(host_op)];
  TRAINSIM_CHECK(source >= 0, "plan: a host op without its accumulation");
  return plan_.ops[static_cast<size_t>(source)].kind == OpKind::kHostAccumulate
             ? source
             : host_source_[static_cast<size_t>(source)];
}

void Interpreter::copy_to_host(OpId id, const Op& op) {
  if (!servers_.empty()) return push_to_servers(op);
  WorkerState& w = *workers_[op.worker];
  std::vector<float> flat;
  {
    std::lock_guard lock(w.mu);
    flat = flatten_densified(gradients_of(w, op.iteration), w.weights, op.first_layer, op.last_layer);
  }
  const OpId accumulation = host_source_[static_cast<size_t>(id)];
  TRAINSIM_CHECK(accumulation >= 0, "plan: a copy to host that no accumulation reads");
  const int32_t host = plan_.ops[static_cast<size_t>(accumulation)].worker;
  if (!local_[static_cast<size_t>(host)]) return transport_.send(op.worker, host, host_copy_tag(id), std::move(flat));
  std::lock_guard lock(host_.mu);
  host_.copies[accumulation][op.worker] = std::move(flat);
}

void Interpreter::host_accumulate_op(OpId id, const Op& op) {
  std::map<int32_t, std::vector<float>> copies;
  for (const OpId dep : op.deps) {  // the copies of workers in other processes
    const Op& copy = plan_.ops[static_cast<size_t>(dep)];
    if (copy.kind == OpKind::kCopyToHost && !local_[static_cast<size_t>(copy.worker)]) {
      copies[copy.worker] = transport_.recv(op.worker, copy.worker, host_copy_tag(dep));
    }
  }
  {
    std::lock_guard lock(host_.mu);
    for (auto& [worker, flat] : host_.copies[id]) copies[worker] = std::move(flat);
    host_.copies.erase(id);
  }
  TRAINSIM_CHECK(!copies.empty(), "plan: host accumulation without copies");
  std::vector<std::span<const float>> chunks;
  for (const auto& [worker, flat] : copies) chunks.emplace_back(flat);
  std::vector<float> mean(copies.begin()->second.size());
  host_accumulate(chunks, mean, 1, 1.0f / static_cast<float>(copies.size()));
  {
    std::lock_guard lock(host_.mu);
    host_.means[id] = {std::move(mean), 0};
  }
  if (host_readers_.contains(id)) hand_out_host_buffer(id, id);
}

// The hosts' AllReduce across machines (cgdp): the mean of the machines'
// means, in host memory (machines of as many workers each: the mean of all).
void Interpreter::host_all_reduce(OpId id, const Op& op) {
  const OpId accumulation = accumulation_of(id);
  std::vector<float> flat;
  {
    std::lock_guard lock(host_.mu);
    flat = std::move(host_.means.at(accumulation).first);
  }
  const std::vector<int>& members = group(op);
  transport_.all_reduce(op.worker, members, tags_[static_cast<size_t>(id)], flat, op.algorithm);
  const float mean = 1.0f / static_cast<float>(members.size());
  for (float& v : flat) v *= mean;
  {
    std::lock_guard lock(host_.mu);
    host_.means.at(accumulation).first = std::move(flat);
  }
  if (host_readers_.contains(id)) hand_out_host_buffer(id, accumulation);
}

// Once `id` leaves the accumulation's buffer final: a copy to each reader in
// another process; this process's readers take it from host memory.
void Interpreter::hand_out_host_buffer(OpId id, OpId accumulation) {
  std::vector<float> buffer;
  int64_t here = 0;
  {
    std::lock_guard lock(host_.mu);
    for (const OpId reader : host_readers_.at(id)) here += local_[static_cast<size_t>(plan_.ops[static_cast<size_t>(reader)].worker)];
    auto it = host_.means.find(accumulation);
    it->second.second = here;
    buffer = here > 0 ? it->second.first : std::move(it->second.first);
    if (here == 0) host_.means.erase(it);
  }
  const int32_t host = plan_.ops[static_cast<size_t>(id)].worker;
  for (const OpId reader : host_readers_.at(id)) {
    const int32_t to = plan_.ops[static_cast<size_t>(reader)].worker;
    if (!local_[static_cast<size_t>(to)]) transport_.send(host, to, host_copy_tag(reader), buffer);
  }
}

void Interpreter::copy_to_device(OpId id, const Op& op) {
  if (!servers_.empty()) return pull_from_servers(op);
  const OpId source = host_source_[static_cast<size_t>(id)];
  TRAINSIM_CHECK(source >= 0, "plan: copying back a chunk never accumulated");
  const int32_t host = plan_.ops[static_cast<size_t>(source)].worker;
  std::vector<float> mean;
  if (!local_[static_cast<size_t>(host)]) {
    mean = transport_.recv(op.worker, host, host_copy_tag(id));
  } else {
    std::lock_guard lock(host_.mu);
    auto it = host_.means.find(accumulation_of(id));
    TRAINSIM_CHECK(it != host_.means.end(), "plan: copying back a chunk never accumulated");
    if (--it->second.second == 0) {  // the last worker takes the buffer
      mean = std::move(it->second.first);
      host_.means.erase(it);
    } else {
      mean = it->second.first;
    }
  }
  WorkerState& w = *workers_[op.worker];
  std::lock_guard lock(w.mu);
  unflatten_densified(mean, gradients_of(w, op.iteration), w.weights, op.first_layer, op.last_layer);
}

// --- the plan's servers (parallax) ----------------------------------------------

void Interpreter::make_servers(const Weights& initial) {
  std::vector<int> members(plan_.workers.size());
  std::iota(members.begin(), members.end(), 0);
  const auto workers = static_cast<float>(members.size());
  const auto add = [&](std::unique_ptr<VariableServer> s, std::vector<float> values) {
    s->server = static_cast<int>(plan_.workers.size() + servers_.size());
    s->optimizer = std::make_unique<Sgd>(options_.sgd);
    s->table.resize(static_cast<size_t>(s->last) + 1);
    // Every layer up to its last (the zero gradients of a dense step need their shapes).
    for (int32_t l = 0; l <= s->last; ++l) s->table[static_cast<size_t>(l)] = initial[static_cast<size_t>(l)];
    VariableServer* raw = s.get();
    s->shard = std::make_unique<ParamServerShard>(transport_, s->server, members, s->shape, std::move(values),
                                                  [this, raw, workers](const ShardUpdate& u) {
                                                    apply_on_server(*raw, u, workers);
                                                  });
    servers_.push_back(std::move(s));
  };
  for (const PlanServer& server : plan_.servers) {
    if (server.rule != ServerRule::kSparseRows) continue;
    const int32_t layer = server.first_layer;
    TRAINSIM_CHECK(server.last_layer == layer, "a sparse server holds one layer's table");
    const LayerParams& params = initial[static_cast<size_t>(layer)];
    TRAINSIM_CHECK(params.size() == 1, "a sparse layer holds one table");
    if (layer != 0) {
      throw InputError("--model", "parallax with a sparse layer (" + std::to_string(layer) + ") after the input",
                       "the embedding table as the first layer (its rows are the batch's token ids)");
    }
    auto s = std::make_unique<VariableServer>();
    s->first = s->last = layer;
    s->shape = {params[0].rows(), params[0].row_size(), true};
    add(std::move(s), params[0].data);
  }
  for (const PlanServer& server : plan_.servers) {
    if (server.rule != ServerRule::kDense) continue;
    auto s = std::make_unique<VariableServer>();
    s->first = server.first_layer;
    s->last = server.last_layer;
    std::vector<float> values = flatten_weights(initial, s->first, s->last);
    s->shape = {1, static_cast<int64_t>(values.size()), false};
    add(std::move(s), std::move(values));
  }
}

// The server's step on the mean of the workers' pushes (their sum / N),
// through the same SGD a worker runs: lazy on a sparse table's touched
// rows, whose new values go into the shard the pulls read; on the dense
// variables, all of them.
void Interpreter::apply_on_server(VariableServer& s, const ShardUpdate& u, float workers) const {
  Gradients grads(s.table.size());
  if (!s.shape.sparse) {
    grads = zero_gradients(network_, s.table);
    std::vector<float> mean(u.gradient.begin(), u.gradient.end());
    for (float& v : mean) v /= workers;
    unflatten_gradients(mean, grads, s.first, s.last);
    s.optimizer->step(s.table, grads, s.first, s.last);
    const std::vector<float> flat = flatten_weights(s.table, s.first, s.last);
    std::copy(flat.begin(), flat.end(), u.weights.begin());
    return;
  }
  ParamGrad g;
  g.sparse = true;
  g.rows.assign(u.rows.begin(), u.rows.end());
  g.row_values = Tensor({static_cast<int64_t>(u.rows.size()), u.row_floats});
  for (size_t i = 0; i < u.gradient.size(); ++i) g.row_values.data[i] = u.gradient[i] / workers;
  grads[static_cast<size_t>(s.first)].push_back(std::move(g));
  s.optimizer->step(s.table, grads, s.first, s.first);
  const std::vector<float>& table = s.table[static_cast<size_t>(s.first)][0].data;
  for (int64_t row : u.rows) {
    std::copy_n(table.begin() + row * u.row_floats, u.row_floats, u.weights.begin() + row * u.row_floats);
  }
}

// kServerStep: the server of the op's layers takes the round's pushes, steps
// its variables and answers the pulls the workers asked with their pushes.
void Interpreter::server_step(const Op& op) {
  const auto it = std::find_if(servers_.begin(), servers_.end(), [&](const auto& s) {
    return s->first == op.first_layer && s->last == op.last_layer;
  });
  TRAINSIM_CHECK(it != servers_.end(), "plan: a server step of layers no server holds");
  (*it)->shard->serve_round(server_tag(op.iteration, **it));
}

int64_t Interpreter::server_tag(int32_t iteration, const VariableServer& s) const {
  const int64_t shard = s.server - static_cast<int64_t>(plan_.workers.size());
  TRAINSIM_CHECK(shard < kShardsPerRound, "plan: more parameter-server shards than a round's tag numbers");
  return server_round_tag(static_cast<int64_t>(iteration) * kShardsPerRound + shard);
}

// CopyToHost of parallax: the worker's gradients to each server (push): a
// sparse table's rows, after which its own copy of that gradient is empty
// so its update leaves the table, and the request for the rows its next
// forward reads, which the server answers after its step; in ps mode also
// every dense gradient, which its update then leaves alone (update() skips
// the step).
void Interpreter::push_to_servers(const Op& op) {
  WorkerState& w = *workers_[op.worker];
  const std::vector<int64_t> next_rows = rows_to_pull(op);
  for (const auto& s : servers_) {
    ParamServerClient client(transport_, op.worker, s->server, s->shape);
    if (!s->shape.sparse) {
      std::vector<float> flat;
      {
        std::lock_guard lock(w.mu);
        flat = flatten_gradients(gradients_of(w, op.iteration), s->first, s->last);
      }
      client.push(server_tag(op.iteration, *s), flat);
      continue;
    }
    ParamGrad g;
    {
      std::lock_guard lock(w.mu);
      ParamGrad& mine = gradients_of(w, op.iteration)[static_cast<size_t>(s->first)][0];
      TRAINSIM_CHECK(mine.sparse, "parallax: a sparse layer's gradient arrived dense");
      g = std::move(mine);
      mine = ParamGrad{true, Tensor(), {}, Tensor({0, s->shape.row_floats})};
    }
    client.push_rows(server_tag(op.iteration, *s), g.rows, g.row_values.data);
    client.request_rows(server_tag(op.iteration, *s), next_rows);
  }
  std::lock_guard lock(w.mu);
  w.pulled_rows[op.iteration] = next_rows;
}

// The table rows worker op.worker's next forward looks up (its next batch's
// token ids), ascending and distinct; none after the last iteration or
// without a sparse server.
std::vector<int64_t> Interpreter::rows_to_pull(const Op& op) {
  std::vector<int64_t> rows;
  const auto sparse =
      std::find_if(servers_.begin(), servers_.end(), [](const auto& s) { return s->shape.sparse; });
  if (op.iteration + 1 < plan_.iterations && sparse != servers_.end()) {
    Tensor x;
    batch_rows(plan_.ops[static_cast<size_t>(forward_of(op.worker, op.iteration + 1))], &x, nullptr);
    std::vector<int64_t> ids;
    ids.reserve(x.data.size());
    for (float id : x.data) ids.push_back(static_cast<int64_t>(id));
    rows = distinct_ascending(ids, (*sparse)->shape.rows);
  }
  return rows;
}

// CopyToDevice of parallax: takes, after the servers' step, the rows asked
// for with the push (kept from it), so the worker's copy of the table is current where its
// next forward reads it, and in ps mode every dense variable.
void Interpreter::pull_from_servers(const Op& op) {
  WorkerState& w = *workers_[op.worker];
  std::vector<int64_t> rows;
  {
    std::lock_guard lock(w.mu);
    rows = take(w.pulled_rows, op.iteration, "plan: a pull before its push");
  }
  for (const auto& s : servers_) {
    ParamServerClient client(transport_, op.worker, s->server, s->shape);
    if (!s->shape.sparse) {
      const std::vector<float> values = client.pull(server_tag(op.iteration, *s));
      std::lock_guard lock(w.mu);
      unflatten_weights(values, w.weights, s->first, s->last);
      continue;
    }
    const std::vector<float> values = client.take_rows(server_tag(op.iteration, *s), rows.size());
    std::lock_guard lock(w.mu);
    std::vector<float>& table = w.weights[static_cast<size_t>(s->first)][0].data;
    const int64_t width = s->shape.row_floats;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(i) * width, width, table.begin() + rows[i] * width);
    }
  }
}

OpId Interpreter::forward_of(int32_t worker, int32_t iteration) const {
  for (OpId id : plan_.streams[static_cast<size_t>(worker)][static_cast<int>(StreamKind::kCompute)]) {
    const Op& op = plan_.ops[static_cast<size_t>(id)];
    if (op.kind == OpKind::kForward && op.iteration == iteration) return id;
  }
  throw std::logic_error("plan: no forward of iteration " + std::to_string(iteration));
}

}  // namespace trainsim::interp
