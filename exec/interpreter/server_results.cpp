// Parallax's servers in a run's result and state: each served variable is
// the union of the machines' shares (table rows r with r mod m = j, the
// j-th slice of a dense range), gathered from the servers held here, from
// the result records of other processes, and into a checkpoint's endpoint.
#include <algorithm>
#include <string>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
namespace {

// Share `share` of `shares` of variable `var` from `from` into `into`
// (weights, or an optimizer's velocity shaped as them; a velocity a step
// never made is left as it is).
void copy_share(const ServedVariable& var, int64_t share, int64_t shares, const Weights& from, Weights& into) {
  if (into.size() < from.size()) into.resize(from.size());
  if (var.sparse) {
    const LayerParams& from_layer = from[static_cast<size_t>(var.first)];
    if (from_layer.empty() || from_layer[0].data.empty()) return;
    const Tensor& source = from_layer[0];
    LayerParams& into_layer = into[static_cast<size_t>(var.first)];
    if (into_layer.empty()) into_layer.resize(1);
    Tensor& target = into_layer[0];
    if (target.data.size() != source.data.size()) target = Tensor(source.shape);
    for (int64_t row = share; row < var.rows; row += shares) {
      std::copy_n(source.data.begin() + row * var.width, var.width, target.data.begin() + row * var.width);
    }
    return;
  }
  const std::vector<float> source = flatten_weights(from, var.first, var.last);
  if (static_cast<int64_t>(source.size()) != var.floats) return;
  std::vector<float> target = flatten_weights(into, var.first, var.last);
  if (static_cast<int64_t>(target.size()) != var.floats) {
    for (int64_t l = var.first; l <= var.last; ++l) {
      const size_t layer = static_cast<size_t>(l);
      into[layer].resize(from[layer].size());
      for (size_t p = 0; p < from[layer].size(); ++p) into[layer][p] = Tensor(from[layer][p].shape);
    }
    target.assign(source.size(), 0.0f);
  }
  const auto [first, count] = dense_slice(var.floats, share, shares);
  std::copy_n(source.begin() + first, count, target.begin() + first);
  unflatten_weights(target, into, var.first, var.last);
}

}  // namespace

void Interpreter::take_server_shares(Weights& weights) const {
  const auto shares = static_cast<int64_t>(server_workers_.size());
  for (const auto& s : servers_) {
    if (!s) continue;
    for (size_t v = 0; v < served_.size(); ++v) copy_share(served_[v], s->share, shares, s->tables[v], weights);
  }
}

// The values share `share` owns, every variable's, in order: its rows
// ascending, its slice.
std::vector<float> Interpreter::share_record(int32_t share) const {
  const auto shares = static_cast<int64_t>(server_workers_.size());
  const MachineServer& s = *servers_[static_cast<size_t>(share)];
  std::vector<float> out;
  for (size_t v = 0; v < served_.size(); ++v) {
    const ServedVariable& var = served_[v];
    if (var.sparse) {
      const std::vector<float>& table = s.tables[v][static_cast<size_t>(var.first)][0].data;
      for (int64_t row = share; row < var.rows; row += shares) {
        out.insert(out.end(), table.begin() + row * var.width, table.begin() + (row + 1) * var.width);
      }
    } else {
      const ServerPart part = dense_share(s.tables[v], var, share, shares);
      out.insert(out.end(), part.dense.begin(), part.dense.end());
    }
  }
  return out;
}

void Interpreter::read_share_record(int32_t share, std::span<const float> record, Weights& weights) const {
  const auto shares = static_cast<int64_t>(server_workers_.size());
  size_t at = 0;
  const auto take = [&](size_t count) {
    TRAINSIM_CHECK(at + count <= record.size(), "the result of server " + std::to_string(share) +
                                                    " is shorter than its plan's: the processes ran different plans");
    const std::span<const float> part = record.subspan(at, count);
    at += count;
    return part;
  };
  for (const ServedVariable& var : served_) {
    if (var.sparse) {
      std::vector<float>& table = weights[static_cast<size_t>(var.first)][0].data;
      for (int64_t row = share; row < var.rows; row += shares) {
        const std::span<const float> values = take(static_cast<size_t>(var.width));
        std::copy(values.begin(), values.end(), table.begin() + row * var.width);
      }
    } else {
      std::vector<float> flat = flatten_weights(weights, var.first, var.last);
      const auto [first, count] = dense_slice(var.floats, share, shares);
      const std::span<const float> values = take(static_cast<size_t>(count));
      std::copy(values.begin(), values.end(), flat.begin() + first);
      unflatten_weights(flat, weights, var.first, var.last);
    }
  }
  TRAINSIM_CHECK(at == record.size(), "the result of server " + std::to_string(share) +
                                          " is longer than its plan's: the processes ran different plans");
}

// Each served variable as one endpoint of the state: the weights and
// velocity of every share a server of this process owns (another process's
// shares come through share_state; with none here, empty).
std::vector<EndpointState> Interpreter::server_states() const {
  std::vector<EndpointState> states(served_.size());
  for (const auto& s : servers_) {
    if (!s) continue;
    for (size_t v = 0; v < served_.size(); ++v) {
      add_server_share(s->share, v, server_share_state(*s, v), states[v]);
    }
  }
  return states;
}

EndpointState Interpreter::server_share_state(const MachineServer& s, size_t variable) const {
  return EndpointState{s.tables[variable], s.optimizers[variable]->velocity(), {}, {}};
}

void Interpreter::add_server_share(int32_t share, size_t variable, const EndpointState& from,
                                   EndpointState& into) const {
  if (into.weights.empty()) into = EndpointState{from.weights, from.velocity, {}, {}};
  const auto shares = static_cast<int64_t>(server_workers_.size());
  copy_share(served_[variable], share, shares, from.weights, into.weights);
  copy_share(served_[variable], share, shares, from.velocity, into.velocity);
}

void Interpreter::resume_servers(std::span<const EndpointState> states) {
  for (const auto& s : servers_) {
    if (!s) continue;
    for (size_t v = 0; v < served_.size(); ++v) {
      const EndpointState& e = states[v];
      bool same = e.weights.size() == s->tables[v].size();
      for (size_t l = 0; same && l < e.weights.size(); ++l) {
        same = e.weights[l].size() == s->tables[v][l].size();
        for (size_t p = 0; same && p < e.weights[l].size(); ++p) same = e.weights[l][p].shape == s->tables[v][l][p].shape;
      }
      if (!same) throw InputError("--resume", "holds a server of other variables", "a checkpoint of this plan");
      s->tables[v] = e.weights;
      s->optimizers[v]->set_velocity(e.velocity);
    }
  }
}

}  // namespace trainsim::interp
