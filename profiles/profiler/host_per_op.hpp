// A GPU worker's host time per compute op (DeviceSpec::host_per_op),
// measured through the executor: the model's `single` plan run for real on
// the device a worker computes on, each compute op's time on the host (from
// its start to its end, while the kernels it queued run) fitted by kind.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "exec/interpreter.hpp"
#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profiler/profiler.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// The host time per compute op of `plan` as runs of it took (`runs`, each
// a timing per op): for each kind (forward with recompute, backward,
// update), over its ops of iterations >= from_iteration in every run, the
// median host time (end_s − start_s) of each number of layers an op spans,
// and through those medians the least-squares line fixed_s + layers ·
// per_layer_s, neither below 0 (a negative slope: their mean, flat; a
// negative intercept: the line through 0). One layer count n (single's
// update spans every layer): its median over n layers, per layer, so a
// pipeline stage's update over fewer layers is priced for its own. A kind
// without ops there: 0. TRAINSIM_CHECK that each run has a
// timing per op.
DeviceSpec::HostPerOp fit_host_per_op(const Plan& plan, const std::vector<std::vector<ExecOpTiming>>& runs,
                                      int32_t from_iteration);

// `model`'s single plan at `batch` samples (its ops the executor's: a
// forward and a backward per group of layers, one update) run through
// execute_plan for options.warmups + options.repeats iterations by
// `workers` workers at once, each its own run on its own thread on the
// device `make_device` makes for it (unset: the CPU's), timing the
// device's work (ExecOptions::time_device_work, as validate's runs do), on
// one batch of options.source's rows or random ones with labels 0, by
// momentum SGD; fit_host_per_op over every run's iterations after the
// warm-ups. On a GPU that is the host's part of each op; on the CPU, whose
// work is the host's, the whole op. InputError naming --repeats or --batch
// below 1, --device for workers below 1.
DeviceSpec::HostPerOp measure_host_per_op(const Model& model, int64_t batch, int64_t workers,
                                          const std::function<std::unique_ptr<Device>(int32_t)>& make_device,
                                          const MeasureOptions& options = {});

}  // namespace trainsim
