// Collective ops: AllReduce (plain, or with Pipe-SGD's codec at every hop of
// the ring), broadcast, barrier; Pipe-SGD's compress; the tags that match a
// collective's members.
#include <map>
#include <tuple>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/interpreter/weight_versions.hpp"
#include "exec/optim/pipesgd_hop_codec.hpp"
#include "exec/transport/collectives.hpp"

namespace trainsim::interp {
namespace {

// pipesgd's wire (seed 002 §3.2) for an AllReduce's codec.
GradientCompression compression_of(Codec codec) {
  switch (codec) {
    case Codec::kNone: return GradientCompression::kNone;
    case Codec::kTrunc16: return GradientCompression::kTrunc16;
    case Codec::kQuant8: return GradientCompression::kQuant8;
  }
  return GradientCompression::kNone;
}

}  // namespace

// Collectives match as in the simulator: the k-th of a kind a member issues
// on a group (in op order) joins the other members' k-th.
void Interpreter::assign_collective_tags() {
  std::map<std::tuple<int32_t, int, int32_t>, int64_t> issued;  // (group, kind, worker) -> count
  std::map<std::tuple<int32_t, int, int64_t>, int64_t> instances;  // (group, kind, k) -> instance
  tags_.assign(plan_.ops.size(), 0);
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    const Op& op = plan_.ops[id];
    if (!is_collective(op.kind)) continue;
    const int64_t k = issued[{op.group, static_cast<int>(op.kind), op.worker}]++;
    const auto instance = instances.try_emplace({op.group, static_cast<int>(op.kind), k},
                                                static_cast<int64_t>(instances.size()));
    tags_[id] = collective_tag(instance.first->second);
  }
}

const std::vector<int>& Interpreter::group(const Op& op) {
  std::lock_guard lock(groups_mu_);
  auto& g = groups_[op.group];
  if (g.empty()) {
    const auto& planned = plan_.groups[static_cast<size_t>(op.group)];
    g.assign(planned.begin(), planned.end());
  }
  return g;
}

// Pipe-SGD's compress op readies the gradients for the lossy wire: sparse
// ones made dense. The codec itself runs at every hop of the AllReduce
// (seed 002 §3.2, Fig. 3b; all_reduce below).
void Interpreter::compress(const Op& op) {
  WorkerState& w = *workers_[op.worker];
  Gradients& grads = host_gradients(w, op.iteration, op.first_layer, op.last_layer);
  std::lock_guard lock(w.mu);
  const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;
  const int64_t last = op.last_layer >= 0 ? op.last_layer : static_cast<int64_t>(network_.layers.size()) - 1;
  densify_range(grads, w.weights, first, last);
}

void Interpreter::all_reduce(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  const std::vector<int>& members = group(op);
  const float mean = 1.0f / static_cast<float>(members.size());
  const int64_t tag = tags_[static_cast<size_t>(id)];
  // The library's AllReduce where the devices keep the sums (NCCL on the
  // members' GPUs), the gradients not coming to the host.
  if (op.codec == Codec::kNone && op.algorithm == CollectiveAlgorithm::kLibrary && transport_.sums_kept(members)) {
    Gradients* grads = nullptr;
    {
      std::lock_guard lock(w.mu);
      grads = &gradients_of(w, op.iteration);
    }
    const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;
    const int64_t last = op.last_layer >= 0 ? op.last_layer : static_cast<int64_t>(grads->size()) - 1;
    const bool done = w.device->all_reduce_kept(
        *grads, first, last, op.dense_only, [&](std::span<KeptValues* const> arrays, int64_t floats) {
          transport_.all_reduce_kept(op.worker, members, tag, arrays, floats, mean);
        });
    if (done) return;
  }
  std::vector<float> flat;
  {
    Gradients& grads = host_gradients(w, op.iteration, op.first_layer, op.last_layer);
    std::lock_guard lock(w.mu);
    // Parallax reduces the dense variables only (dense_only); the sparse go
    // to servers (hybrid) or around the ring as rows (ar).
    flat = op.dense_only ? flatten_gradients(grads, op.first_layer, op.last_layer)
                         : flatten_densified(grads, w.weights, op.first_layer, op.last_layer);
  }
  if (op.codec == Codec::kNone) {
    transport_.all_reduce(op.worker, members, tag, flat, op.algorithm);
  } else {
    CollectivePeers peers(transport_, op.worker, members, tag);
    all_reduce_ring_codec(peers, flat, pipesgd_hop_codec(compression_of(op.codec)));
  }
  for (float& v : flat) v *= mean;
  Gradients* kept = nullptr;
  {
    std::lock_guard lock(w.mu);
    kept = &gradients_of(w, op.iteration);
  }
  // Up where the update reads it, without the worker's lock while the store
  // uploads (the plan keeps the update and other ops off these layers).
  const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;  // -1: every layer
  const int64_t last = op.last_layer >= 0 ? op.last_layer : static_cast<int64_t>(kept->size()) - 1;
  if (w.device->take_flat_gradients(flat, *kept, first, last, op.dense_only)) return;
  std::lock_guard lock(w.mu);
  Gradients& grads = gradients_of(w, op.iteration);
  if (op.dense_only) {
    unflatten_gradients(flat, grads, op.first_layer, op.last_layer);
  } else {
    unflatten_densified(flat, grads, w.weights, op.first_layer, op.last_layer);
  }
}

// The group's first member's weights of the op's layers to every member.
void Interpreter::broadcast(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  const std::vector<int>& members = group(op);
  w.device->weights_to_host(w.weights, op.first_layer, op.last_layer);
  std::vector<float> flat = flatten_weights(w.weights, op.first_layer, op.last_layer);
  transport_.broadcast(op.worker, members, members.front(), tags_[static_cast<size_t>(id)], flat);
  if (op.worker != members.front()) {
    stash_before_change(w);
    unflatten_weights(flat, w.weights, op.first_layer, op.last_layer);
  }
}

void Interpreter::barrier(OpId id, const Op& op) {
  transport_.barrier(op.worker, group(op), tags_[static_cast<size_t>(id)]);
}

}  // namespace trainsim::interp
