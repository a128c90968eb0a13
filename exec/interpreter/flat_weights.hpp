// Weights and gradients of a layer range as flat float buffers, the shape a
// transport carries them in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/tensor/tensor.hpp"

namespace trainsim::interp {

// Layers [first, last] of `weights`, their tensors one after another.
std::vector<float> flatten_weights(const Weights& weights, int64_t first, int64_t last);

// The inverse: `flat` into layers [first, last] of `weights`, whose shapes it must fill exactly.
void unflatten_weights(std::span<const float> flat, Weights& weights, int64_t first, int64_t last);

// Sparse gradients of layers [first, last] made dense, so they reduce as flat buffers.
void densify_range(Gradients& grads, const Weights& weights, int64_t first, int64_t last);

// Every gradient of layers [first, last] in flatten_gradients' order, a
// sparse one as its dense table (zeros but its rows, repeats added) written
// straight into the buffer: what densify_range then flatten_gradients give,
// with one pass over each table instead of three. `grads` stays as it was.
std::vector<float> flatten_densified(const Gradients& grads, const Weights& weights, int64_t first, int64_t last);

// The inverse: `flat` into those gradients, a sparse one replaced by the
// dense tensor of its slice (as densify_range leaves it).
void unflatten_densified(std::span<const float> flat, Gradients& grads, const Weights& weights, int64_t first,
                         int64_t last);

}  // namespace trainsim::interp
