// What the CPU and GPU profilers share: the random batch they measure on,
// per-layer medians over timed passes, and the profile those medians make.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/tensor.hpp"
#include "model/layer.hpp"
#include "profiles/profile.hpp"
#include "profiles/profiler/profiler.hpp"

namespace trainsim {

// The optimizer the profilers time the update with: `trainsim run`'s
// defaults, with a learning rate small enough that the repeated steps
// barely move the weights.
constexpr SgdOptions kTimedSgd{1e-4, 0.9, 0.0};

// A batch of the model's input, uniform in [-1, 1), or token ids in [0,
// rows) where the first layer looks rows up (embedding, embedding_bag).
Tensor random_input(const Model& model, int64_t batch, std::mt19937_64& rng);

// InputError naming --dataset where options.source is given and its rows
// are not samples of the model's input.
void check_source(const Model& model, const MeasureOptions& options);

// A batch of `batch` rows drawn uniformly from options.source where one is
// given, else random_input's (the GPU profiler's, resident for its passes).
Tensor measured_batch(const Model& model, int64_t batch, const MeasureOptions& options);

// Per layer, the fraction of its table a sparse first layer looking rows up
// by token ids touches with the ids of `x` (at least one row, so
// validate_profile's (0, 1] holds); 1 for every other layer.
std::vector<double> batch_sparsity(const Model& model, const Tensor& x);

// Such a first layer's union_sparsity: the fraction of its table the
// batches of 2, 4, ..., 16 workers touch together, each batch drawn as a
// pass draws its rows, never below what fewer workers touch (nothing for
// any other model).
void add_union_sparsity(const Model& model, int64_t batch, const MeasureOptions& options, Profile& profile);

// Per layer, the median over passes of `times` (pass after pass, `count` per pass).
std::vector<double> layer_medians(const std::vector<double>& times, int64_t count);

// Each layer's medians at one batch size.
struct LayerMedians {
  std::vector<double> forward_s, backward_s, update_s;
  std::vector<double> sparsity;  // empty: every layer dense (1)
};

// The fixed parts of layer times are fitted from a second measurement at
// batch / 8 (GPipe's micro-batches are that size or smaller).
constexpr int64_t kSmallBatchDivisor = 8;

// The batch-independent part of a time measured at `batch` (t) and at a
// smaller `small` batch (t_small), fitting t(b) = fixed + c·b through both:
// fixed = (t_small·batch − t·small) / (batch − small), within [0, t].
double fixed_part_s(double t, double t_small, int64_t batch, int64_t small);

// The measured profile (source "measured", fp32) of `model` at `batch` from
// its medians there and, when `at_small` is not null, at `small` samples (the
// fixed parts); bytes from the model (4 bytes per parameter and per output
// element). Validated.
Profile measured_profile(const Model& model, int64_t batch, const LayerMedians& at_batch, int64_t small,
                         const LayerMedians* at_small, ProfileDevice device);

}  // namespace trainsim
