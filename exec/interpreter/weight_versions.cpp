// Weight versions: live, stashed (reference-counted by the plan's readers),
// SpecTrain's predicted.
#include "exec/interpreter/weight_versions.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainsim::interp {

bool reads_weights(OpKind kind) {
  return kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kRecompute;
}

namespace {

// The layers of `network` whose parameters `op` reads: every layer of its
// range, or for a backward those whose backward reads them.
template <typename Visit>
void for_layers_read(const Op& op, const Network& network, Visit visit) {
  const auto layers = static_cast<int32_t>(network.layers.size());
  const int32_t first = op.first_layer < 0 ? 0 : op.first_layer;
  const int32_t last = op.last_layer < 0 ? layers - 1 : std::min(op.last_layer, layers - 1);
  for (int32_t l = first; l <= last; ++l) {
    if (op.kind != OpKind::kBackward || network.layers[l]->backward_reads_params()) visit(l);
  }
}

}  // namespace

void count_reader(WorkerState& w, const Op& op, const Network& network) {
  if (!reads_weights(op.kind) || op.weight_version < 0) return;
  ++w.readers[op.weight_version];
  std::vector<int32_t>& readers = w.layer_readers[op.weight_version];
  readers.resize(network.layers.size(), 0);
  for_layers_read(op, network, [&](int32_t l) { ++readers[l]; });
}

const Weights& select_weights(WorkerState& w, const Op& op, const SpecTrain::Only& only) {
  const int32_t version = op.weight_version;
  std::lock_guard lock(w.mu);
  if (op.weights == WeightPolicy::kPredicted) {
    if (version - op.weight_ahead != w.version) {
      throw std::logic_error("plan: an op predicts weight version " + std::to_string(version) + " from " +
                             std::to_string(version - op.weight_ahead) + " but the worker holds " +
                             std::to_string(w.version));
    }
    w.device->predict_weights(*w.spectrain, w.weights, op.weight_ahead, op.first_layer, op.last_layer, w.predicted,
                              only);
    return w.predicted;
  }
  if (version < 0 || version == w.version) return w.weights;
  auto it = w.snapshots.find(version);
  if (op.weights == WeightPolicy::kLatest || it == w.snapshots.end()) {
    throw std::logic_error("plan: an op reads " + std::string(weight_policy_name(op.weights)) +
                           " weight version " + std::to_string(version) + " but the worker holds " +
                           std::to_string(w.version));
  }
  return it->second.weights;
}

WeightsGeneration generation_of(WorkerState& w, const Op& op) {
  if (op.weights == WeightPolicy::kPredicted) return kUnversionedWeights;
  std::lock_guard lock(w.mu);
  if (op.weight_version < 0 || op.weight_version == w.version) return w.generation;
  auto it = w.snapshots.find(op.weight_version);
  return it == w.snapshots.end() ? kUnversionedWeights : it->second.generation;
}

void done_reading(WorkerState& w, const Op& op, const Network& network) {
  const int32_t version = op.weight_version;
  if (version < 0) return;
  std::lock_guard lock(w.mu);
  std::vector<int32_t>& readers = w.layer_readers[version];
  for_layers_read(op, network, [&](int32_t l) { --readers[l]; });
  if (--w.readers[version] == 0) {
    w.layer_readers.erase(version);
    if (version != w.version) w.snapshots.erase(version);
  }
}

void stash_before_change(WorkerState& w) {
  std::lock_guard lock(w.mu);
  auto it = w.readers.find(w.version);
  if (it != w.readers.end() && it->second > 0) {
    const std::vector<int32_t>& readers = w.layer_readers.at(w.version);
    std::vector<uint8_t> read(w.weights.size(), 0);
    for (size_t l = 0; l < read.size() && l < readers.size(); ++l) read[l] = readers[l] > 0 ? 1 : 0;
    // Where the device keeps the weights, the stash stays there too.
    w.snapshots[w.version] = Snapshot{w.device->copy_weights(w.weights, read), w.generation};
  }
  ++w.version;
  ++w.generation;
}

}  // namespace trainsim::interp
