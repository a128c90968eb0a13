// The measuring profiler: times every layer's forward and backward with
// exec's CPU kernels on this machine and writes them as a profile
// (`trainsim.profile/1`, source "measured"), the input the cost models and
// the simulator read in place of the analytic estimate.
#pragma once

#include <cstdint>
#include <functional>

#include "model/layer.hpp"
#include "profiles/profile.hpp"

namespace trainsim {

struct MeasureOptions {
  int64_t repeats = 20;    // timed runs per layer; the profile keeps their median
  int64_t warmups = 3;     // untimed runs first (caches, allocator, page faults)
  int64_t concurrent = 1;  // copies measuring at once, one thread each (N workers' contention)
  uint64_t seed = 1;       // weights and random inputs
  // Called by the measuring thread 0 after each layer: (layers done, layers in all).
  std::function<void(int64_t done, int64_t total)> progress;
};

// Profile of `model` at `batch` samples, measured here. Per layer, for the
// whole batch: forward_s and backward_s are the medians of `repeats` timed
// forward_range / backward_range calls of that one layer (after `warmups`),
// on random inputs of the model's input shape (token ids in [0, rows) for an
// embedding-bag first layer) and random output gradients in [-1, 1). With
// `concurrent` = N, N threads each run the whole measurement on their own
// network copy, layer by layer in step (a barrier before each layer), and
// thread 0's medians are reported, so the times include the memory-bandwidth
// contention of N workers. param_bytes = 4·params, activation_bytes =
// 4·batch·output elements, sparsity = distinct rows the measured backward
// touched / table rows. device = {"<CPU model> (N threads)", "cpu"}.
// InputError naming --batch, --repeats or --concurrent for values < 1, and the
// model's own errors when exec cannot build it.
Profile measure_profile(const Model& model, int64_t batch, const MeasureOptions& options = {});

}  // namespace trainsim
