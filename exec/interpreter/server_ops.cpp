// Parallax's parameter servers (seed 004 §3, docs/equations.md §3) as the
// plan lays them out: one per machine, on its first worker, owning share j
// of m of every served variable. A worker's kCopyToHost puts its gradient
// (and the rows its next forward reads) in its machine's host memory; a
// kSend of parameter gradients pushes its share j to machine j's server,
// from the worker or, with local aggregation, from the host summing its
// machine's rows; each kServerStep steps its share of one variable on the
// mean of the pushes; a kSend of weights answers a pusher with its share of
// the new values, to the worker or to the host, and kCopyToDevice takes the
// host's values (server_pulls.cpp). Host memory is the server's process's: a
// copy from, or to, a worker of another process travels as a message
// (host_copy_tag).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"

namespace trainsim::interp {

// The machines from the plan: each server step's worker holds its
// machine's server (shares in ascending worker order), and a worker belongs
// to the machine whose steps wait for its copy to host memory.
void Interpreter::link_servers() {
  to_host_.assign(plan_.ops.size(), 0);
  share_of_worker_.assign(plan_.workers.size(), -1);
  if (plan_.servers.empty()) return;
  for (const Op& op : plan_.ops) {
    if (op.kind == OpKind::kServerStep) server_workers_.push_back(op.worker);
  }
  std::sort(server_workers_.begin(), server_workers_.end());
  server_workers_.erase(std::unique(server_workers_.begin(), server_workers_.end()), server_workers_.end());
  for (const Op& op : plan_.ops) {
    if (op.kind != OpKind::kServerStep) continue;
    const auto share = static_cast<int32_t>(
        std::lower_bound(server_workers_.begin(), server_workers_.end(), op.worker) - server_workers_.begin());
    for (const OpId dep : op.deps) {
      const Op& d = plan_.ops[static_cast<size_t>(dep)];
      if (d.kind == OpKind::kCopyToHost) share_of_worker_[static_cast<size_t>(d.worker)] = share;
    }
  }
  // Pushes from host memory (their send waits on the machine's copies), and
  // pulls into it (their recv feeds a copy to a device), with their sends.
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    const Op& op = plan_.ops[id];
    if (op.kind == OpKind::kSend && !op.deps.empty() &&
        plan_.ops[static_cast<size_t>(op.deps.front())].kind == OpKind::kCopyToHost) {
      to_host_[id] = 1;
      aggregated_ = true;
    }
    if (op.kind != OpKind::kCopyToDevice) continue;
    const int32_t share = share_of_worker_[static_cast<size_t>(op.worker)];
    TRAINSIM_CHECK(share >= 0, "plan: a copy to a device of a worker no server serves");
    const int32_t server = server_workers_[static_cast<size_t>(share)];
    for (const OpId dep : op.deps) {
      const Op& d = plan_.ops[static_cast<size_t>(dep)];
      TRAINSIM_CHECK(d.worker == server, "plan: a copy to a device waits on another machine's host");
      if (d.kind == OpKind::kRecv) to_host_[static_cast<size_t>(dep)] = to_host_[static_cast<size_t>(sender_of(dep))] = 1;
    }
    if (local_[static_cast<size_t>(server)] && !local_[static_cast<size_t>(op.worker)]) {
      handout_left_[static_cast<OpId>(id)] = op.deps.size();
      for (const OpId dep : op.deps) handout_readers_[dep].push_back(static_cast<OpId>(id));
    }
  }
}

void Interpreter::make_servers(const Weights& initial) {
  for (const PlanServer& server : plan_.servers) {
    ServedVariable v;
    v.first = server.first_layer;
    v.last = server.last_layer;
    v.sparse = server.rule == ServerRule::kSparseRows;
    if (v.sparse) {
      TRAINSIM_CHECK(v.last == v.first, "a sparse server holds one layer's table");
      const LayerParams& params = initial[static_cast<size_t>(v.first)];
      TRAINSIM_CHECK(params.size() == 1, "a sparse layer holds one table");
      if (v.first != 0) {
        throw InputError("--model", "parallax with a sparse layer (" + std::to_string(v.first) + ") after the input",
                         "the embedding table as the first layer (its rows are the batch's token ids)");
      }
      v.rows = params[0].rows();
      v.width = params[0].row_size();
    } else {
      v.floats = static_cast<int64_t>(flatten_weights(initial, v.first, v.last).size());
    }
    served_.push_back(v);
  }
  servers_.resize(server_workers_.size());
  for (size_t j = 0; j < server_workers_.size(); ++j) {
    if (!local_[static_cast<size_t>(server_workers_[j])]) continue;
    auto s = std::make_unique<MachineServer>();
    s->share = static_cast<int32_t>(j);
    s->worker = server_workers_[j];
    for (const ServedVariable& v : served_) {
      s->optimizers.push_back(std::make_unique<Sgd>(options_.sgd));
      s->tables.emplace_back(initial.begin(), initial.begin() + v.last + 1);
    }
    servers_[j] = std::move(s);
  }
}

size_t Interpreter::variable_of(const Op& step) const {
  for (size_t v = 0; v < served_.size(); ++v) {
    if (served_[v].first == step.first_layer && served_[v].last == step.last_layer) return v;
  }
  throw std::logic_error("plan: a server step of layers no server holds");
}

// The server of the machine whose server worker is `worker`, held here.
MachineServer& Interpreter::server_at(int32_t worker) const {
  const auto it = std::lower_bound(server_workers_.begin(), server_workers_.end(), worker);
  TRAINSIM_CHECK(it != server_workers_.end() && *it == worker, "plan: a server op on a worker holding no server");
  MachineServer* s = servers_[static_cast<size_t>(it - server_workers_.begin())].get();
  TRAINSIM_CHECK(s != nullptr, "plan: a server op in a process not holding its server");
  return *s;
}

// The table rows worker op.worker's next forward looks up (its next batch's
// token ids), ascending and distinct; none after the last iteration or
// without a sparse variable.
std::vector<int64_t> Interpreter::rows_to_pull(const Op& op) {
  const auto sparse = std::find_if(served_.begin(), served_.end(), [](const auto& v) { return v.sparse; });
  if (op.iteration + 1 >= plan_.iterations || sparse == served_.end()) return {};
  Tensor x;
  batch_rows(plan_.ops[static_cast<size_t>(forward_of(op.worker, op.iteration + 1))], &x, nullptr);
  std::vector<int64_t> ids;
  ids.reserve(x.data.size());
  for (float id : x.data) ids.push_back(static_cast<int64_t>(id));
  return distinct_ascending(ids, sparse->rows);
}

OpId Interpreter::forward_of(int32_t worker, int32_t iteration) const {
  for (OpId id : plan_.streams[static_cast<size_t>(worker)][static_cast<int>(StreamKind::kCompute)]) {
    const Op& op = plan_.ops[static_cast<size_t>(id)];
    if (op.kind == OpKind::kForward && op.iteration == iteration) return id;
  }
  throw std::logic_error("plan: no forward of iteration " + std::to_string(iteration));
}

// The worker's whole push: per variable its sparse rows (each once, the
// sum of its tokens' gradients) and the rows its next forward reads, or its
// dense gradient.
ServerMessage Interpreter::gradient_message(WorkerState& w, const Op& op) {
  std::vector<int64_t> wanted = rows_to_pull(op);
  ServerMessage message(served_.size());
  // The served variables' layers alone come to the host: the others' sums
  // may stay where the worker's device steps them (hybrid's dense layers).
  TRAINSIM_CHECK(!served_.empty(), "parallax: a push with no variable served");
  int32_t first = served_.front().first, last = served_.front().last;
  for (const ServedVariable& var : served_) {
    first = std::min(first, var.first);
    last = std::max(last, var.last);
  }
  const Gradients& grads = host_gradients(w, op.iteration, first, last);
  std::lock_guard lock(w.mu);
  for (size_t v = 0; v < served_.size(); ++v) {
    ServerPart& part = message[v];
    if (!served_[v].sparse) {
      part.dense = flatten_gradients(grads, served_[v].first, served_[v].last);
      continue;
    }
    const ParamGrad& g = grads[static_cast<size_t>(served_[v].first)][0];
    TRAINSIM_CHECK(g.sparse, "parallax: a sparse layer's gradient arrived dense");
    const RowMerge::Part touched{g.rows, g.row_values.data};  // a row per token: summed, a row per row touched
    SummedRows summed = sum_rows(std::span(&touched, 1), served_[v].rows, served_[v].width);
    part.rows = std::move(summed.rows);
    part.values = std::move(summed.values);
    part.wanted = std::move(wanted);
    wanted.clear();
  }
  return message;
}

// kCopyToHost: the worker's whole push into its machine's host memory.
void Interpreter::copy_to_server_host(OpId id, const Op& op) {
  ServerMessage message = gradient_message(*workers_[op.worker], op);
  const int32_t server = server_workers_[static_cast<size_t>(share_of_worker_[static_cast<size_t>(op.worker)])];
  if (!local_[static_cast<size_t>(server)]) {
    return transport_.send(op.worker, server, host_copy_tag(id), encode_server_message(message));
  }
  MachineServer& s = server_at(server);
  std::lock_guard lock(s.mu);
  for (const ServerPart& part : message) {
    if (!part.wanted.empty()) s.host_wanted[{op.iteration, op.worker}] = part.wanted;
  }
  s.host_wanted.try_emplace({op.iteration, op.worker});
  s.copies[id] = std::move(message);
}

// The copies `op` waits on, those of other processes' workers received.
void Interpreter::gather_copies(MachineServer& s, const Op& op) {
  std::lock_guard gather(s.gather_mu);
  {
    std::lock_guard lock(s.mu);
    if (s.gathered[op.iteration]) return;
  }
  for (const OpId dep : op.deps) {
    const Op& copy = plan_.ops[static_cast<size_t>(dep)];
    if (copy.kind != OpKind::kCopyToHost || local_[static_cast<size_t>(copy.worker)]) continue;
    ServerMessage message =
        decode_server_message(transport_.recv(s.worker, copy.worker, host_copy_tag(dep)), served_.size());
    std::lock_guard lock(s.mu);
    std::vector<int64_t>& wanted = s.host_wanted[{copy.iteration, copy.worker}];
    for (const ServerPart& part : message) {
      if (!part.wanted.empty()) wanted = part.wanted;
    }
    s.copies[dep] = std::move(message);
  }
  std::lock_guard lock(s.mu);
  s.gathered[op.iteration] = true;
}

// Local aggregation: the machine's copies' rows summed row by row (copies
// in the plan's order), and the union of the rows they want. Under s.mu,
// after gather_copies.
const ServerMessage& Interpreter::aggregate_of(MachineServer& s, const Op& op) {
  auto it = s.aggregate.find(op.iteration);
  if (it != s.aggregate.end()) return it->second;
  ServerMessage sum(served_.size());
  for (size_t v = 0; v < served_.size(); ++v) {
    if (!served_[v].sparse) continue;
    std::vector<RowMerge::Part> parts;
    std::vector<int64_t> wanted;
    for (const OpId dep : op.deps) {
      if (plan_.ops[static_cast<size_t>(dep)].kind != OpKind::kCopyToHost) continue;
      const ServerPart& part = s.copies.at(dep)[v];
      parts.push_back({part.rows, part.values});
      wanted.insert(wanted.end(), part.wanted.begin(), part.wanted.end());
    }
    SummedRows summed = sum_rows(parts, served_[v].rows, served_[v].width);
    ServerPart& out = sum[v];
    out.rows = std::move(summed.rows);
    out.values = std::move(summed.values);
    out.wanted = distinct_ascending(wanted, served_[v].rows);
  }
  return s.aggregate.emplace(op.iteration, std::move(sum)).first->second;
}

// A push to machine j's server: the worker's share j (with local
// aggregation only its dense part), or the host's summed rows of share j.
void Interpreter::send_push(OpId id, const Op& op) {
  const auto shares = static_cast<int64_t>(server_workers_.size());
  const auto j = static_cast<int64_t>(
      std::lower_bound(server_workers_.begin(), server_workers_.end(), op.peer) - server_workers_.begin());
  ServerMessage message(served_.size());
  if (to_host_[static_cast<size_t>(id)]) {
    MachineServer& s = server_at(op.worker);
    gather_copies(s, op);
    std::lock_guard lock(s.mu);
    const ServerMessage& sum = aggregate_of(s, op);
    for (size_t v = 0; v < served_.size(); ++v) {
      if (served_[v].sparse) message[v] = share_part(sum[v], served_[v].width, j, shares);
    }
  } else {
    const ServerMessage whole = gradient_message(*workers_[op.worker], op);
    for (size_t v = 0; v < served_.size(); ++v) {
      if (aggregated_ && served_[v].sparse) continue;
      message[v] = share_part(whole[v], served_[v].width, j, shares);
    }
  }
  transport_.send(op.worker, op.peer, send_tag(id), encode_server_message(message), SendReturns::kLeft);
}

// kServerStep: this machine's share of one variable stepped on the mean of
// the round's pushes (the host's copies, or their sum, and those received),
// through the same SGD a worker runs: lazily on a table's rows, on the
// whole of a dense range (the share's slice is what the pulls read). Keeps
// what each remote pusher wants back.
void Interpreter::server_step(const Op& op) {
  MachineServer& s = server_at(op.worker);
  gather_copies(s, op);
  const size_t v = variable_of(op);
  const ServedVariable& var = served_[v];
  const auto shares = static_cast<int64_t>(server_workers_.size());
  std::lock_guard lock(s.mu);
  std::vector<ServerPart> parts;
  if (aggregated_ && var.sparse) parts.push_back(share_part(aggregate_of(s, op)[v], var.width, s.share, shares));
  for (const OpId dep : op.deps) {
    const Op& d = plan_.ops[static_cast<size_t>(dep)];
    if (d.kind == OpKind::kCopyToHost) {
      if (!(aggregated_ && var.sparse)) parts.push_back(share_part(s.copies.at(dep)[v], var.width, s.share, shares));
    } else if (d.kind == OpKind::kRecv) {
      const ServerPart& part = s.arrived.at(dep)[v];
      parts.push_back(part);
      if (var.sparse && to_host_[static_cast<size_t>(sender_of(dep))] == static_cast<uint8_t>(aggregated_)) {
        auto& wanted = s.wanted[{op.iteration, d.peer}];
        wanted.resize(served_.size());
        wanted[v] = part.wanted;
      }
    }
  }
  const float mean = 1.0f / static_cast<float>(plan_.workers.size());
  Weights& table = s.tables[v];
  Gradients grads(table.size());
  if (var.sparse) {
    std::vector<RowMerge::Part> pieces;
    for (const ServerPart& part : parts) pieces.push_back({part.rows, part.values});
    SummedRows summed = sum_rows(pieces, var.rows, var.width);
    for (float& value : summed.values) value *= mean;
    ParamGrad g;
    g.sparse = true;
    g.row_values = Tensor({static_cast<int64_t>(summed.rows.size()), var.width});
    g.row_values.data = std::move(summed.values);
    g.rows = std::move(summed.rows);
    grads[static_cast<size_t>(var.first)].push_back(std::move(g));
  } else {
    std::vector<float> gradient(static_cast<size_t>(var.floats), 0.0f);
    for (const ServerPart& part : parts) {
      for (size_t i = 0; i < part.dense.size(); ++i) gradient[static_cast<size_t>(part.offset) + i] += part.dense[i];
    }
    for (float& g : gradient) g *= mean;
    grads = zero_gradients(network_, table);
    unflatten_gradients(gradient, grads, var.first, var.last);
  }
  s.optimizers[v]->step(table, grads, var.first, var.last);
  // What iteration op.iteration - 2 left is read by no op still to run.
  const auto old = [&](int32_t iteration) { return iteration + 2 <= op.iteration; };
  std::erase_if(s.copies, [&](const auto& e) { return old(plan_.ops[static_cast<size_t>(e.first)].iteration); });
  std::erase_if(s.arrived, [&](const auto& e) { return old(plan_.ops[static_cast<size_t>(e.first)].iteration); });
  std::erase_if(s.aggregate, [&](const auto& e) { return old(e.first); });
  std::erase_if(s.gathered, [&](const auto& e) { return old(e.first); });
}

// A worker's own copy of a served table moves only by pulls: its update
// drops the table's rows (which went to the servers).
void Interpreter::drop_served_rows(Gradients& grads) const {
  for (const ServedVariable& var : served_) {
    if (!var.sparse) continue;
    ParamGrad& g = grads[static_cast<size_t>(var.first)][0];
    g.rows.clear();
    g.row_values = Tensor({0, var.width});
  }
}

}  // namespace trainsim::interp
