// The analytic method on GPU workers whose host prices each compute op
// (DeviceSpec::host_per_op): the cost models time an op by its device work
// alone, so their iteration is bounded below by the time each worker's host
// spends on its compute ops (docs/equations.md §12).
#pragma once

#include "profiles/cluster.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// Each worker's host time per iteration: op_host_s of its compute ops in
// `plan`, over the plan's iterations. Where the largest exceeds
// `prediction.iteration_s`, the prediction takes it (the excess as compute,
// samples_per_s following) and says so in a note. Nothing where the
// cluster's device prices no host time, or where its workers share a
// computer's cores (shared_cores without shared_devices), as the simulator.
void price_host_per_op(const Plan& plan, const Cluster& cluster, Prediction& prediction);

// Whether price_host_per_op bounds anything on `cluster`: its device prices
// a host time and its workers do not share a computer's cores.
bool prices_host_per_op(const Cluster& cluster);

}  // namespace trainsim
