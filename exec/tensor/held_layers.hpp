// What a network that runs only some layer ranges of a model must hold: a
// worker's stage needs the weights of its own layers alone, and the
// activations (with their gradients) of the tensors its ranges read, write
// or carry across their boundaries. A GPU's RangeNetwork allocates those
// alone (exec/cuda/cuda_network.cpp); the plan's ops of the worker give the
// ranges (Device::hold_ranges).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/tensor/layers.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

struct HeldLayers {
  std::vector<uint8_t> computes;  // per layer: inside one of the ranges
  std::vector<uint8_t> tensors;   // per tensor + 1 (0: the model's input): read, written or carried by a range
  std::vector<uint8_t> cuts;      // per cut (0..layers): the boundary before or after one of the ranges
  // Every layer computed (the whole model's network).
  bool every_layer() const;
};

// What `ranges` of `network` touch; every layer, tensor and cut where
// `ranges` is empty. A range outside the network is a TRAINSIM_CHECK.
HeldLayers held_layers(const Network& network, std::span<const LayerRange> ranges);

// The distinct ranges of `ranges` (sorted), each checked within `layers` layers.
std::vector<LayerRange> distinct_ranges(std::vector<LayerRange> ranges, int64_t layers);

}  // namespace trainsim
