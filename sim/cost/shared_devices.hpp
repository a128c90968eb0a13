// The analytic method on devices that virtual workers share
// (Cluster::shared_devices): the cost models give each worker a device of
// its own, so their iteration is bounded below by the work each physical
// device does for its workers (docs/equations.md §11).
#pragma once

#include "profiles/cluster.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// Each physical device's compute per iteration: the work_s of its workers'
// compute-stream ops in `plan`, over the plan's iterations; divided by n·r(n)
// for its n workers (shared_device_rate). Where the largest exceeds
// `prediction.iteration_s`, the prediction takes it (the excess as compute,
// samples_per_s following) and says so in a note. Nothing where the cluster
// shares no device.
void price_shared_devices(const Plan& plan, const Cluster& cluster, Prediction& prediction);

}  // namespace trainsim
