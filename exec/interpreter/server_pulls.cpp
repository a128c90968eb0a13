// Parallax's pulls (server_ops.cpp has the pushes and the servers' steps):
// a server's answer to each pusher, to a worker or to a host; the host's
// values copied back to its machine's workers, as messages to a worker of
// another process once the host's ops they wait on have ended.
#include <algorithm>
#include <iterator>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "model/error.hpp"

namespace trainsim::interp {

// A pull to a pusher: its share of the new dense values and of the rows it
// wants (to a worker: unless its host asked for them; to a host: the rows).
void Interpreter::send_pull(OpId id, const Op& op) {
  MachineServer& s = server_at(op.worker);
  const auto shares = static_cast<int64_t>(server_workers_.size());
  const bool to_host = to_host_[static_cast<size_t>(id)] != 0;
  ServerMessage message(served_.size());
  {
    std::lock_guard lock(s.mu);
    std::vector<std::vector<int64_t>> wanted;
    if (to_host || !aggregated_) {  // the rows go where they were asked from
      auto it = s.wanted.find({op.iteration, op.peer});
      if (it != s.wanted.end()) {
        wanted = std::move(it->second);
        s.wanted.erase(it);
      }
    }
    wanted.resize(served_.size());
    for (size_t v = 0; v < served_.size(); ++v) {
      const ServedVariable& var = served_[v];
      ServerPart& part = message[v];
      if (var.sparse) {
        part.rows = std::move(wanted[v]);
        part.values = rows_of_table(s.tables[v][static_cast<size_t>(var.first)][0].data, part.rows, var.width);
      } else if (!to_host) {
        part = dense_share(s.tables[v], var, s.share, shares);
      }
    }
  }
  transport_.send(op.worker, op.peer, send_tag(id), encode_server_message(message), SendReturns::kLeft);
}

// A push arriving at a server, kept for its step; a pull arriving at a
// worker, installed; at a host, its rows kept for the machine's copies back.
void Interpreter::recv_server_message(OpId id, const Op& op, std::vector<float> payload) {
  ServerMessage message = decode_server_message(payload, served_.size());
  if (payload_of(sender_of(id)) == Payload::kParamGradient) {
    MachineServer& s = server_at(op.worker);
    std::lock_guard lock(s.mu);
    s.arrived[id] = std::move(message);
    return;
  }
  if (!to_host_[static_cast<size_t>(id)]) return install_pull(*workers_[op.worker], message);
  MachineServer& s = server_at(op.worker);
  std::lock_guard lock(s.mu);
  for (size_t v = 0; v < served_.size(); ++v) {
    const ServerPart& part = message[v];
    put_rows(s.tables[v][static_cast<size_t>(served_[v].first)][0].data, part.rows, part.values, served_[v].width);
  }
}

// What a worker's copy back takes from its host: the rows it wants (of the
// host's own share, or all of them where the host pulled the others) and
// the host's share of the dense values. Under s.mu.
ServerMessage Interpreter::host_pull_for(MachineServer& s, int32_t iteration, int32_t worker) {
  const auto shares = static_cast<int64_t>(server_workers_.size());
  std::vector<int64_t> wanted;
  if (auto it = s.host_wanted.find({iteration, worker}); it != s.host_wanted.end()) {
    wanted = std::move(it->second);
    s.host_wanted.erase(it);
  }
  ServerMessage message(served_.size());
  for (size_t v = 0; v < served_.size(); ++v) {
    const ServedVariable& var = served_[v];
    ServerPart& part = message[v];
    if (var.sparse) {
      std::copy_if(wanted.begin(), wanted.end(), std::back_inserter(part.rows),
                   [&](int64_t row) { return aggregated_ || share_of_row(row, shares) == s.share; });
      part.values = rows_of_table(s.tables[v][static_cast<size_t>(var.first)][0].data, part.rows, var.width);
    } else {
      part = dense_share(s.tables[v], var, s.share, shares);
    }
  }
  return message;
}

// kCopyToDevice: the host's values into the worker's copy of the variables.
void Interpreter::pull_from_server_host(OpId id, const Op& op) {
  const int32_t server = server_workers_[static_cast<size_t>(share_of_worker_[static_cast<size_t>(op.worker)])];
  ServerMessage message;
  if (!local_[static_cast<size_t>(server)]) {
    message = decode_server_message(transport_.recv(op.worker, server, host_copy_tag(id)), served_.size());
  } else {
    MachineServer& s = server_at(server);
    std::lock_guard lock(s.mu);
    message = host_pull_for(s, op.iteration, op.worker);
  }
  install_pull(*workers_[op.worker], message);
}

void Interpreter::install_pull(WorkerState& w, const ServerMessage& pull) const {
  // The served variables' weights only: the others may stay where the
  // worker's device steps them.
  for (const ServedVariable& var : served_) w.device->weights_to_host(w.weights, var.first, var.last);
  std::lock_guard lock(w.mu);
  ++w.generation;
  for (size_t v = 0; v < served_.size(); ++v) {
    const ServedVariable& var = served_[v];
    const ServerPart& part = pull[v];
    if (var.sparse) {
      put_rows(w.weights[static_cast<size_t>(var.first)][0].data, part.rows, part.values, var.width);
    } else if (!part.dense.empty()) {
      std::vector<float> flat = flatten_weights(w.weights, var.first, var.last);
      std::copy(part.dense.begin(), part.dense.end(), flat.begin() + part.offset);
      unflatten_weights(flat, w.weights, var.first, var.last);
    }
  }
}

// After op `done` ends here: a copy back to a worker of another process
// whose host ops have all ended gets its values as a message.
void Interpreter::hand_out_pulls(OpId done) {
  const auto readers = handout_readers_.find(done);
  if (readers == handout_readers_.end()) return;
  for (const OpId reader : readers->second) {
    {
      std::lock_guard lock(handout_mu_);
      if (--handout_left_.at(reader) > 0) continue;
    }
    const Op& copy = plan_.ops[static_cast<size_t>(reader)];
    MachineServer& s = server_at(plan_.ops[static_cast<size_t>(done)].worker);
    ServerMessage message;
    {
      std::lock_guard lock(s.mu);
      message = host_pull_for(s, copy.iteration, copy.worker);
    }
    transport_.send(s.worker, copy.worker, host_copy_tag(reader), encode_server_message(message));
  }
}

}  // namespace trainsim::interp
