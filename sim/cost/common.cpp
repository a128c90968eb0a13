// Shared cost-model pieces; see common.hpp.
#include "sim/cost/common.hpp"

#include <algorithm>
#include <cmath>

#include "model/error.hpp"

namespace trainsim {

ModelTotals range_totals(const Profile& profile, int64_t first, int64_t last) {
  TRAINSIM_CHECK(first >= 0 && last < static_cast<int64_t>(profile.layers.size()) && first <= last,
                 "layer range out of bounds");
  ModelTotals t;
  for (int64_t i = first; i <= last; ++i) {
    const LayerProfile& l = profile.layers[i];
    t.forward_s += l.forward_s;
    t.backward_s += l.backward_s;
    t.param_bytes += l.param_bytes;
    (l.sparse ? t.sparse_param_bytes : t.dense_param_bytes) += l.param_bytes;
    t.activation_bytes += l.activation_bytes;
    t.workspace_bytes = std::max(t.workspace_bytes, l.workspace_bytes.value_or(0.0));
    t.forward_fixed_s += l.forward_fixed_s.value_or(0.0);
    t.backward_fixed_s += l.backward_fixed_s.value_or(0.0);
  }
  return t;
}

ModelTotals model_totals(const Profile& profile) {
  return range_totals(profile, 0, static_cast<int64_t>(profile.layers.size()) - 1);
}

double scaled_s(double total_s, double fixed_s, double fraction) {
  return fixed_s + (total_s - fixed_s) * fraction;
}

double update_s(double param_bytes, const Cluster& cluster) {
  return kUpdatePassesPerParamByte * param_bytes / cluster.device.memory_bytes_per_s;
}

double spectrain_pass_s(double update_s) { return kSpecTrainPassesPerParamByte / kUpdatePassesPerParamByte * update_s; }

namespace {

// One layer's step: its measured update where the profile has one (and its
// gradient stays as profiled), else update_s of its bytes.
double layer_update_s(const LayerProfile& l, const Cluster& cluster, bool measured_applies) {
  return l.update_s && measured_applies ? *l.update_s : update_s(l.param_bytes, cluster);
}

}  // namespace

double range_update_s(const Profile& profile, int64_t first, int64_t last, const Cluster& cluster) {
  TRAINSIM_CHECK(first >= 0 && last < static_cast<int64_t>(profile.layers.size()) && first <= last,
                 "layer range out of bounds");
  double total_s = 0;
  for (int64_t i = first; i <= last; ++i) {
    total_s += layer_update_s(profile.layers[static_cast<size_t>(i)], cluster, true);
  }
  return total_s;
}

double model_update_s(const Profile& profile, const Cluster& cluster) {
  return range_update_s(profile, 0, static_cast<int64_t>(profile.layers.size()) - 1, cluster);
}

double exchanged_update_s(const Profile& profile, const Cluster& cluster, int64_t workers) {
  double total_s = 0;
  for (const LayerProfile& l : profile.layers) {
    const bool densified = l.sparse && workers > 1;
    total_s += layer_update_s(l, cluster, !densified);
  }
  return total_s;
}

void check_cluster_devices(const Cluster& cluster) {
  const double devices = static_cast<double>(cluster.machines) * static_cast<double>(cluster.devices_per_machine);
  if (devices > static_cast<double>(kMaxClusterDevices)) {
    throw InputError("cluster " + cluster.name,
                     "has " + std::to_string(cluster.machines) + " machines x " +
                         std::to_string(cluster.devices_per_machine) + " devices",
                     "at most " + std::to_string(kMaxClusterDevices) + " devices in all for a prediction or a plan");
  }
}

int64_t resolve_workers(StrategyConfig& config, const Cluster& cluster) {
  const int64_t devices = device_count(cluster);
  const int64_t workers = config.get_int("workers", devices, 1);
  if (workers > devices) {
    throw InputError("--set workers", std::to_string(workers) + " workers",
                     "at most the " + std::to_string(devices) + " devices of " + cluster.name);
  }
  return workers;
}

DeviceMemory replica_memory(const Profile& profile, int64_t first, int64_t last, double batches_in_flight) {
  const ModelTotals t = range_totals(profile, first, last);
  DeviceMemory m;
  m.weights_bytes = t.param_bytes;
  m.gradients_bytes = t.param_bytes;
  m.optimizer_bytes = t.param_bytes;
  m.activations_bytes = batches_in_flight * t.activation_bytes + t.workspace_bytes;
  return m;
}

void finish_prediction(Prediction& p, const StrategyConfig& config) {
  if (std::isinf(p.iteration_s)) {
    throw InputError(p.strategy, "the predicted iteration time overflows a double",
                     "profile times, sizes and batch small enough to add up below 1e308");
  }
  TRAINSIM_CHECK(p.iteration_s > 0, p.strategy + ": iteration time must be positive");
  p.samples_per_s = p.samples_per_iteration / p.iteration_s;
  p.config = config.resolved();
}

}  // namespace trainsim
