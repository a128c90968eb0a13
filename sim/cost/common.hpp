// Pieces every cost model shares: whole-model sums, the optimizer update,
// worker counts and the memory of a full model replica.
#pragma once

#include <cstdint>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

struct ModelTotals {
  double forward_s = 0;         // Σ forward_s
  double backward_s = 0;        // Σ backward_s
  double param_bytes = 0;       // Σ param_bytes (= gradient bytes M)
  double dense_param_bytes = 0; // Σ over layers not marked sparse
  double sparse_param_bytes = 0;// Σ over sparse layers (whole tables)
  double activation_bytes = 0;  // Σ activation_bytes: what one batch keeps for backward
  double workspace_bytes = 0;   // max workspace_bytes of a layer
  double forward_fixed_s = 0;   // Σ forward_fixed_s (measured profiles; else 0)
  double backward_fixed_s = 0;  // Σ backward_fixed_s
};

// A micro-batch of `fraction` of the batch: the fixed part of the time plus
// its share of the rest (docs/equations.md §5's t/M when fixed_s = 0).
double scaled_s(double total_s, double fixed_s, double fraction);

ModelTotals model_totals(const Profile& profile);
ModelTotals range_totals(const Profile& profile, int64_t first, int64_t last);

// Time of the optimizer update of `param_bytes` on one device of `cluster`.
double update_s(double param_bytes, const Cluster& cluster);

// SpecTrain's own work (seed 000 eqs. 1 and 4): a prediction Ŵ = W − s·η·v
// reads W and v and writes Ŵ; the smoothing v = γ·v + (1 − γ)·g after each
// update reads v and g and writes v: 3 passes over the parameters each.
inline constexpr double kSpecTrainPassesPerParamByte = 3.0;

// One such pass (a prediction, or the smoothing of v) of weights whose
// optimizer update takes `update_s`: 3 of the update's 5 passes at the rate
// the update runs, so a measured update of cache-resident weights prices it
// at the cache's rate (3·bytes / memory bandwidth for an estimated update).
double spectrain_pass_s(double update_s);

// The update of layers [first, last]: Σ each layer's measured update_s where
// the profile has one, else update_s(its param_bytes) — a measured step of a
// cache-resident layer can be several times faster than the streaming rate.
double range_update_s(const Profile& profile, int64_t first, int64_t last, const Cluster& cluster);
double model_update_s(const Profile& profile, const Cluster& cluster);

// The update of the whole model on one of `workers` replicas that exchange
// their gradients as one dense vector (AllReduce, parameter server, host
// sum): with more than one, a sparse layer's gradient was made dense for the
// exchange, so its step passes over the whole table, update_s(param_bytes),
// not its profiled sparse step; other layers as model_update_s.
double exchanged_update_s(const Profile& profile, const Cluster& cluster, int64_t workers);

// The most devices a cluster may have for a prediction or a plan
// (docs/simulator.md "Limits"): the cost models keep a memory figure per
// device and the simulator ports per device, so 10^6 devices hold tens of MB.
inline constexpr int64_t kMaxClusterDevices = 1'000'000;

// InputError naming the cluster when machines x devices_per_machine passes
// kMaxClusterDevices (computed without overflow).
void check_cluster_devices(const Cluster& cluster);

// Key "workers": default every device of the cluster, at least 1 and at most
// device_count(cluster); records the value.
int64_t resolve_workers(StrategyConfig& config, const Cluster& cluster);

// Memory of one device holding layers [first, last] with momentum SGD:
// weights, gradients and momentum of those layers, and `batches_in_flight`
// batches' activations.
DeviceMemory replica_memory(const Profile& profile, int64_t first, int64_t last, double batches_in_flight);

// Fills samples_per_s from samples_per_iteration and iteration_s, and the
// config from the resolved settings; the strategy's own fields stay.
void finish_prediction(Prediction& prediction, const StrategyConfig& config);

}  // namespace trainsim
