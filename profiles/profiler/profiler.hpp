// The measuring profiler: times every layer's forward and backward with
// exec's CPU kernels on this machine and writes them as a profile
// (`trainsim.profile/1`, source "measured"), the input the cost models and
// the simulator read in place of the analytic estimate.
#pragma once

#include <cstdint>
#include <functional>

#include "exec/tensor/tensor.hpp"
#include "model/layer.hpp"
#include "profiles/profile.hpp"

namespace trainsim {

struct MeasureOptions {
  int64_t repeats = 20;    // timed training passes; the profile keeps each layer's median
  int64_t warmups = 3;     // untimed passes first (caches, allocator, page faults)
  int64_t concurrent = 1;  // copies measuring at once, one thread each (N workers' contention)
  uint64_t seed = 1;       // weights and random inputs
  // The data set the first forward gathers each batch from, rows of the
  // model's input (validate passes the training set, so the gather and a
  // sparse layer's touched rows are the run's); null: random rows.
  const Tensor* source = nullptr;
  // Called by the measuring thread 0 after each pass: (passes done, passes in all).
  std::function<void(int64_t done, int64_t total)> progress;
};

// Profile of `model` at `batch` samples, measured here. Each of `warmups` +
// `repeats` passes is one training step as a worker runs it: every layer's
// forward in order (forward_range of that layer on the previous one's
// output; the last layer's forward includes the softmax cross-entropy loss
// and its gradient, as the executor's does), every backward in reverse order
// (on the gradient the next layer produced), then every layer's momentum-SGD
// step followed by zeroing its gradient (where the executor zeroes it). Each
// layer is timed in place, so its caches are as a real step leaves them.
// forward_s, backward_s and update_s (0 for layers without weights) are each
// layer's medians over the timed passes, for the whole batch. The input is
// gathered from `source` or from random rows of the model's input shape
// (token ids in [0, rows) for an embedding or embedding-bag first layer);
// the labels are 0, one per position of the output. With `concurrent` = N, N
// threads each run the passes on their own network copy, in step (a barrier
// before each pass), and thread 0's medians are reported, so the times
// include the contention of N workers. param_bytes = 4·params,
// activation_bytes = 4·batch·output elements, sparsity = distinct rows the
// last pass's backward touched / table rows; for a first layer looking rows
// up by token ids, union_sparsity = the distinct ids of 2, 4, 8, 16 batches
// drawn alike / table rows. device = {"<CPU model> (N
// threads)", "cpu"}. InputError naming --batch, --repeats or --concurrent for
// values < 1, and the model's own errors when exec cannot build it.
Profile measure_profile(const Model& model, int64_t batch, const MeasureOptions& options = {});

// Several measurements of one model and batch folded into one: each layer's
// times (forward, backward, their splits and fixed parts, update) are the
// medians over `profiles`, so one measurement taken while the machine was
// disturbed moves no layer. Bytes and sparsity are the first profile's.
// TRAINSIM_CHECK that the profiles are not empty and have the same layers and
// batch.
Profile median_profile(const std::vector<Profile>& profiles);

}  // namespace trainsim
