// Weight versions: live, stashed (reference-counted by the plan's readers),
// SpecTrain's predicted.
#include "exec/interpreter/weight_versions.hpp"

#include <stdexcept>
#include <string>

namespace trainsim::interp {

bool reads_weights(OpKind kind) {
  return kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kRecompute;
}

void count_reader(WorkerState& w, const Op& op) {
  if (reads_weights(op.kind) && op.weight_version >= 0) ++w.readers[op.weight_version];
}

const Weights& select_weights(WorkerState& w, const Op& op) {
  const int32_t version = op.weight_version;
  std::lock_guard lock(w.mu);
  if (op.weights == WeightPolicy::kPredicted) {
    if (version - op.weight_ahead != w.version) {
      throw std::logic_error("plan: an op predicts weight version " + std::to_string(version) + " from " +
                             std::to_string(version - op.weight_ahead) + " but the worker holds " +
                             std::to_string(w.version));
    }
    w.spectrain->predict_into(w.weights, op.weight_ahead, op.first_layer, op.last_layer, w.predicted);
    return w.predicted;
  }
  if (version < 0 || version == w.version) return w.weights;
  auto it = w.snapshots.find(version);
  if (op.weights == WeightPolicy::kLatest || it == w.snapshots.end()) {
    throw std::logic_error("plan: an op reads " + std::string(weight_policy_name(op.weights)) +
                           " weight version " + std::to_string(version) + " but the worker holds " +
                           std::to_string(w.version));
  }
  return it->second;
}

void done_reading(WorkerState& w, int32_t version) {
  if (version < 0) return;
  std::lock_guard lock(w.mu);
  if (--w.readers[version] == 0 && version != w.version) w.snapshots.erase(version);
}

void stash_before_change(WorkerState& w) {
  std::lock_guard lock(w.mu);
  auto it = w.readers.find(w.version);
  if (it != w.readers.end() && it->second > 0) w.snapshots[w.version] = w.weights;
  ++w.version;
}

}  // namespace trainsim::interp
