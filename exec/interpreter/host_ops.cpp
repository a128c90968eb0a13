// Host ops: CGDP's copies to the host, their accumulation there and the
// copies back (Parallax's copies, to its servers' hosts, are server_ops.cpp's).
#include <algorithm>
#include <span>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/optim/host_accumulate.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
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
  if (!plan_.servers.empty()) return copy_to_server_host(id, op);
  WorkerState& w = *workers_[op.worker];
  std::vector<float> flat;
  {
    Gradients& grads = host_gradients(w, op.iteration, op.first_layer, op.last_layer);
    std::lock_guard lock(w.mu);
    flat = flatten_densified(grads, w.weights, op.first_layer, op.last_layer);
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
  // On the host's threads, as CGDP sums (seed 003 §3.1 B-4-3) and the probe
  // measures the host's summing rate.
  host_accumulate(chunks, mean, host_sum_threads(static_cast<int64_t>(mean.size())),
                  1.0f / static_cast<float>(copies.size()));
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
  if (!plan_.servers.empty()) return pull_from_server_host(id, op);
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
  Gradients* grads = nullptr;
  {
    std::lock_guard lock(w.mu);
    grads = &gradients_of(w, op.iteration);
  }
  // Up to the device that keeps the sums, where its update reads them (the
  // copy back, seed 003 §3.1 B-4-4), without the worker's lock while the
  // store uploads (the plan keeps the update and other ops off these layers).
  const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;  // -1: every layer
  const int64_t last = op.last_layer >= 0 ? op.last_layer : static_cast<int64_t>(grads->size()) - 1;
  if (w.device->take_flat_gradients(mean, *grads, first, last, /*dense_only=*/false)) return;
  std::lock_guard lock(w.mu);
  unflatten_densified(mean, *grads, w.weights, op.first_layer, op.last_layer);
}

}  // namespace trainsim::interp
