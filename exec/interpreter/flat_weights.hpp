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

}  // namespace trainsim::interp
