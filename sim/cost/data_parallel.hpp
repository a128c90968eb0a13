// Pieces the data-parallel cost models share (dp-ps, dp-ring, dp-overlap,
// pipesgd, cgdp, parallax): the common prediction skeleton, the `algorithm`
// key, gradient buckets in backward order, the in-order pipeline of transfer
// stages, and where workers sit on the machines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// A synchronous data-parallel prediction: `workers` replicas, each on its own
// batch of profile.batch_size samples; iteration_s = compute_s +
// exposed_comm_s (both per device, every device alike); one full replica
// (replica_memory, one batch of activations) per worker. Strategy buffers are
// added by the caller, which then calls finish_prediction.
Prediction data_parallel_prediction(const std::string& strategy, const Profile& profile, int64_t workers,
                                    double compute_s, double exposed_comm_s);

// Key "algorithm" (default "ring"), one of collective_algorithm_names().
CollectiveAlgorithm read_collective_algorithm(StrategyConfig& config);

// Gradients grouped in backward order (last layer first).
struct GradientGroup {
  int64_t first = 0;   // lowest layer whose gradients are in the group
  int64_t last = 0;    // highest such layer
  double bytes = 0;    // Σ param_bytes of its layers
  double ready_s = 0;  // from the start of backward: when backward has finished layer `first`
};

// Walks the layers from the last to the first adding their gradients to the
// open group, which closes once its bytes reach `group_bytes` (> 0); the last
// group takes what remains. Layers without parameters add nothing, so every
// group has bytes > 0 and no group is formed on a model without parameters.
std::vector<GradientGroup> group_gradients_by_bytes(const Profile& profile, double group_bytes);

// Jobs passing in order through a chain of resources, each serving one job at
// a time in job order (a permutation flow shop): job j enters resource k at
// max(its end on resource k-1 (or ready_s[j] for k = 0), the end of job j-1
// on resource k), and stays stage_s[j][k]. Returns when the last job leaves
// the last resource; 0 without jobs.
double flow_shop_end_s(const std::vector<double>& ready_s, const std::vector<std::vector<double>>& stage_s);

// Workers placed in order on the machines, filling each before the next:
// entry k is how many of the first `workers` devices sit on machine k.
std::vector<int64_t> workers_per_machine(const Cluster& cluster, int64_t workers);

}  // namespace trainsim
