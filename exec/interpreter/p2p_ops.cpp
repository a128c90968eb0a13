// Point-to-point ops: send and recv, what each carries (activations,
// gradients, parameter gradients, weights, Parallax's sparse rows), and the
// bookkeeping of the sends that read a shared buffer.
#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"

namespace trainsim::interp {

OpId Interpreter::sender_of(OpId recv) const {
  const Op& r = plan_.ops[static_cast<size_t>(recv)];
  TRAINSIM_CHECK(!r.deps.empty(), "a recv without its send");
  return r.deps.front();
}

// What a send carries, of the op it depends on. kSparseRows: Parallax's
// `ar` mode (seed 004 §3.1) gathers every worker's sparse rows around the
// ring; a worker's own rows first, then, hop by hop, the block it received
// the step before.
Payload Interpreter::payload_of(OpId send) const {
  const Op& s = plan_.ops[static_cast<size_t>(send)];
  TRAINSIM_CHECK(!s.deps.empty(), "a send without the op it sends the result of");
  return s.payload;
}

// With servers in the plan, parameter gradients and weights are Parallax's
// pushes and pulls (server_ops.cpp).
bool Interpreter::server_payload(Payload payload) const {
  return !plan_.servers.empty() && (payload == Payload::kParamGradient || payload == Payload::kWeights);
}

void Interpreter::send(OpId id, const Op& op) {
  if (server_payload(payload_of(id))) {
    return payload_of(id) == Payload::kParamGradient ? send_push(id, op) : send_pull(id, op);
  }
  WorkerState& w = *workers_[op.worker];
  const Op& source = plan_.ops[static_cast<size_t>(op.deps.front())];
  const int32_t mb = std::max(0, source.microbatch);
  std::vector<float> payload;
  std::optional<Gradients> released;  // the iteration's gradients, read by their last send
  std::optional<Tensor> boundary;     // an activation or input gradient, brought to the host unlocked
  if (payload_of(id) == Payload::kParamGradient) host_gradients(w, op.iteration, op.first_layer, op.last_layer);
  {
    std::lock_guard lock(w.mu);
    switch (payload_of(id)) {
      case Payload::kActivation: {
        boundary =
            take(w.outputs, {source.iteration, mb, source.last_layer}, "plan: sending an activation the worker lacks");
        break;
      }
      case Payload::kInputGradient: {
        boundary = take(w.output_grads, {source.iteration, mb, source.first_layer - 1},
                        "plan: sending a gradient the worker lacks");
        break;
      }
      case Payload::kParamGradient: {
        payload = flatten_densified(gradients_of(w, op.iteration), w.weights, op.first_layer, op.last_layer);
        auto left = w.gradient_sends_left.find(op.iteration);
        if (left != w.gradient_sends_left.end() && --left->second == 0) {
          w.gradient_sends_left.erase(left);
          auto set = w.grads.find(op.iteration);
          released = std::move(set->second);
          w.grads.erase(set);
        }
        break;
      }
      case Payload::kSparseRows:
        payload = sparse_rows_block(w, op);
        break;
      case Payload::kNone: throw std::logic_error("plan: a send without its payload");
      case Payload::kWeights: {
        auto it = w.weight_payloads.find(op.deps.front());
        TRAINSIM_CHECK(it != w.weight_payloads.end(), "plan: sending weights never updated");
        // Several sends may carry one update's weights: the last one takes them.
        if (--it->second.second == 0) {
          payload = std::move(it->second.first);
          w.weight_payloads.erase(it);
        } else {
          payload = it->second.first;
        }
        break;
      }
    }
  }
  if (boundary && device_to_device(op.worker, op.peer)) {
    Tensor sent = w.device->export_boundary(std::move(*boundary));
    if (sent.exported != nullptr) {
      const auto bytes = static_cast<int64_t>(sizeof(float)) * element_count(sent.shape);
      {
        std::lock_guard lock(on_device_mu_);
        on_device_[id].push_back(std::move(sent));
      }
      transport_.send(op.worker, op.peer, send_tag(id), {}, SendReturns::kLeft);
      return transport_.count_beside(op.worker, op.peer, bytes);
    }
    boundary = std::move(sent);
  }
  if (boundary && passed_kept(op.worker, op.peer)) {
    Tensor sent = w.device->export_boundary(std::move(*boundary));
    if (sent.exported != nullptr) {
      transport_.pass_kept(op.worker, op.peer, send_tag(id), *sent.exported, element_count(sent.shape));
      return transport_.send(op.worker, op.peer, send_tag(id), {}, SendReturns::kLeft);
    }
    boundary = std::move(sent);
  }
  if (boundary) {
    w.device->to_host(*boundary);
    payload = packed_boundary(std::move(*boundary)).data;
  }
  transport_.send(op.worker, op.peer, send_tag(id), std::move(payload), SendReturns::kLeft);
  if (released) release_gradients(w, std::move(*released));
}

void Interpreter::recv(OpId id, const Op& op) {
  const OpId from = sender_of(id);
  const Op& send_op = plan_.ops[static_cast<size_t>(from)];
  const Op& source = plan_.ops[static_cast<size_t>(send_op.deps.front())];
  std::vector<float> payload = transport_.recv(op.worker, op.peer, send_tag(from));
  if (server_payload(payload_of(from))) return recv_server_message(id, op, std::move(payload));
  WorkerState& w = *workers_[op.worker];
  const int32_t mb = std::max(0, source.microbatch);
  std::optional<Tensor> on_device;  // a boundary passed device to device
  const bool boundary_payload = payload_of(from) == Payload::kActivation || payload_of(from) == Payload::kInputGradient;
  if (boundary_payload && device_to_device(send_op.worker, op.worker)) {
    {
      std::lock_guard lock(on_device_mu_);
      auto it = on_device_.find(from);
      if (it != on_device_.end()) {
        on_device = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) on_device_.erase(it);
        TRAINSIM_CHECK(payload.empty(), "a boundary passed both on the device and in its message");
      }
    }
    if (on_device) on_device = w.device->import_boundary(std::move(*on_device));
  } else if (boundary_payload && payload.empty() && passed_kept(send_op.worker, op.worker)) {
    // Passed by the transport into an array of this device's.
    PassedKept passed = transport_.take_kept(op.worker, send_op.worker, send_tag(from),
                                             [&w](int64_t floats) { return w.device->boundary_array(floats); });
    const int32_t layer = payload_of(from) == Payload::kActivation ? source.last_layer : source.first_layer - 1;
    const int64_t sample = per_sample(layer);
    TRAINSIM_CHECK(sample > 0 && passed.floats % sample == 0, "a boundary of " + std::to_string(passed.floats) +
                                                                  " values passed, not whole samples of " +
                                                                  std::to_string(sample));
    on_device = as_layer_output({}, layer);
    on_device->shape.front() = passed.floats / sample;
    on_device->exported = std::move(passed.array);
  }
  const auto boundary = [&](int32_t layer) {
    return on_device ? std::move(*on_device) : as_layer_output(std::move(payload), layer);
  };
  std::lock_guard lock(w.mu);
  switch (payload_of(from)) {
    case Payload::kActivation:
      w.outputs[{source.iteration, mb, source.last_layer}] = boundary(source.last_layer);
      break;
    case Payload::kInputGradient:
      w.output_grads[{source.iteration, mb, source.first_layer - 1}] = boundary(source.first_layer - 1);
      break;
    case Payload::kParamGradient:
    case Payload::kWeights:
    case Payload::kSparseRows: w.received[id] = std::move(payload); break;
    case Payload::kNone: throw std::logic_error("plan: a recv of a send without its payload");
  }
}

bool Interpreter::device_to_device(int32_t from, int32_t to) const {
  const auto local = [&](int32_t w) { return local_[static_cast<size_t>(w)] != 0; };
  if (!local(from) || !local(to)) return false;
  return workers_[static_cast<size_t>(from)]->device->reaches(*workers_[static_cast<size_t>(to)]->device);
}

bool Interpreter::passed_kept(int32_t from, int32_t to) const {
  return !device_to_device(from, to) && transport_.passes_kept(from, to);
}

// Every boundary's (sender, receiver) the transport passes, once each, in
// the plan's order: the same list in every process.
std::vector<std::pair<int, int>> Interpreter::kept_directions() const {
  std::vector<std::pair<int, int>> directions;
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    const Op& op = plan_.ops[id];
    if (op.kind != OpKind::kSend) continue;
    const Payload payload = payload_of(static_cast<OpId>(id));
    if (payload != Payload::kActivation && payload != Payload::kInputGradient) continue;
    const std::pair<int, int> d{op.worker, op.peer};
    if (!passed_kept(op.worker, op.peer)) continue;
    if (std::find(directions.begin(), directions.end(), d) == directions.end()) directions.push_back(d);
  }
  return directions;
}

int64_t Interpreter::per_sample(int32_t layer) const {
  const std::vector<int64_t>& sample = output_shape(layer);
  return std::accumulate(sample.begin(), sample.end(), int64_t{1}, std::multiplies<>());
}

Tensor Interpreter::as_layer_output(std::vector<float> data, int32_t layer) const {
  const std::vector<int64_t>& sample = output_shape(layer);
  Tensor t;
  t.shape = {static_cast<int64_t>(data.size()) / per_sample(layer)};
  t.shape.insert(t.shape.end(), sample.begin(), sample.end());
  t.data = std::move(data);
  return t;
}

// What the boundary after `layer` carries, per sample (packed when several
// tensors cross it).
const std::vector<int64_t>& Interpreter::output_shape(int32_t layer) const {
  return network_.cut_shapes[static_cast<size_t>(layer) + 1];
}

// A worker that sends its gradients to a parameter server and has no
// update of its own releases the iteration's set after its last send.
void Interpreter::count_gradient_sends_without_update() {
  std::set<std::pair<int32_t, int32_t>> updated;  // (worker, iteration)
  for (const Op& op : plan_.ops) {
    if (op.kind == OpKind::kUpdate) updated.insert({op.worker, op.iteration});
  }
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    const Op& op = plan_.ops[id];
    if (op.kind != OpKind::kSend || payload_of(static_cast<OpId>(id)) != Payload::kParamGradient) continue;
    if (updated.contains({op.worker, op.iteration})) continue;
    ++workers_[op.worker]->gradient_sends_left[op.iteration];
  }
}

// Sends carrying the weights an update wrote.
int32_t Interpreter::weight_sends_of(OpId update_id) {
  std::lock_guard lock(sends_mu_);
  if (weight_senders_.empty()) {
    weight_senders_.assign(plan_.ops.size(), 0);
    for (const Op& op : plan_.ops) {
      if (op.kind == OpKind::kSend && !op.deps.empty()) ++weight_senders_[static_cast<size_t>(op.deps.front())];
    }
  }
  return weight_senders_[static_cast<size_t>(update_id)];
}

// --- parallax, mode=ar -------------------------------------------------------

// The block a send of the ring allgather carries: at its first step the
// worker's own sparse rows of every sparse layer (each row once, summed), each as its row count (a
// float, exact below 2^24) then encode_sparse_rows; later, the block the
// worker received the step before (kept for its own update).
std::vector<float> Interpreter::sparse_rows_block(WorkerState& w, const Op& send) {
  const OpId source = send.deps.front();
  if (plan_.ops[static_cast<size_t>(source)].kind == OpKind::kRecv) {
    auto it = w.received.find(source);
    TRAINSIM_CHECK(it != w.received.end(), "parallax: relaying a block never received");
    return it->second;
  }
  std::vector<float> block;
  const Gradients& grads = gradients_of(w, send.iteration);
  for (size_t l = 0; l < grads.size(); ++l) {
    for (size_t p = 0; p < grads[l].size(); ++p) {
      const ParamGrad& g = grads[l][p];
      if (!g.sparse) continue;
      const Tensor& table = w.weights[l][p];
      const RowMerge::Part touched{g.rows, g.row_values.data};  // each row once, its tokens' gradients summed
      // The table's shape {rows, width}: its values may be on the device.
      const SummedRows summed = sum_rows(std::span(&touched, 1), table.rows(), table.shape.back());
      TRAINSIM_CHECK(summed.rows.size() < (size_t{1} << 24), "parallax: too many sparse rows for one block");
      block.push_back(static_cast<float>(summed.rows.size()));
      const std::vector<float> rows = encode_sparse_rows(summed.rows, summed.values);
      block.insert(block.end(), rows.begin(), rows.end());
    }
  }
  return block;
}

// Before the update: the other workers' rows, every block this worker
// received in the iteration, appended to its own sparse gradients (repeated
// rows add), and the sum scaled to the mean over the workers, as the
// AllReduce did for the dense ones.
void Interpreter::add_gathered_rows(WorkerState& w, const Op& update, Gradients& grads) {
  std::vector<std::vector<float>> blocks;
  {
    std::lock_guard lock(w.mu);
    for (auto it = w.received.begin(); it != w.received.end();) {
      const Op& recv = plan_.ops[static_cast<size_t>(it->first)];
      if (recv.iteration != update.iteration || payload_of(sender_of(it->first)) != Payload::kSparseRows) {
        ++it;
        continue;
      }
      blocks.push_back(std::move(it->second));
      it = w.received.erase(it);
    }
  }
  for (const std::vector<float>& block : blocks) {
    size_t at = 0;
    for (size_t l = 0; l < grads.size(); ++l) {
      for (size_t p = 0; p < grads[l].size(); ++p) {
        ParamGrad& g = grads[l][p];
        if (!g.sparse) continue;
        TRAINSIM_CHECK(at < block.size(), "parallax: a gathered block ends early");
        const auto count = static_cast<size_t>(block[at++]);
        const int64_t width = w.weights[l][p].shape.back();  // the table's, whose values may be on the device
        const size_t floats = count * static_cast<size_t>(2 + width);
        TRAINSIM_CHECK(at + floats <= block.size(), "parallax: a gathered block ends early");
        const SummedRows rows = decode_sparse_rows(std::span<const float>(block).subspan(at, floats), width);
        at += floats;
        g.rows.insert(g.rows.end(), rows.rows.begin(), rows.rows.end());
        g.row_values.data.insert(g.row_values.data.end(), rows.values.begin(), rows.values.end());
        g.row_values.shape = {static_cast<int64_t>(g.rows.size()), width};
      }
    }
    TRAINSIM_CHECK(at == block.size(), "parallax: a gathered block longer than its rows");
  }
  const float mean = 1.0f / static_cast<float>(plan_.workers.size());
  for (LayerGrads& layer : grads) {
    for (ParamGrad& g : layer) {
      if (g.sparse) {
        for (float& v : g.row_values.data) v *= mean;
      }
    }
  }
}

}  // namespace trainsim::interp
