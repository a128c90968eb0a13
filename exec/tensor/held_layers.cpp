#include "exec/tensor/held_layers.hpp"

#include <algorithm>
#include <string>

#include "model/error.hpp"

namespace trainsim {

bool HeldLayers::every_layer() const {
  return std::all_of(computes.begin(), computes.end(), [](uint8_t c) { return c != 0; });
}

std::vector<LayerRange> distinct_ranges(std::vector<LayerRange> ranges, int64_t layers) {
  for (const LayerRange& r : ranges) {
    TRAINSIM_CHECK(0 <= r.first && r.first <= r.last && r.last < layers,
                   "layer range [" + std::to_string(r.first) + ", " + std::to_string(r.last) +
                       "] outside a network of " + std::to_string(layers) + " layers");
  }
  std::sort(ranges.begin(), ranges.end(), [](const LayerRange& a, const LayerRange& b) {
    return a.first != b.first ? a.first < b.first : a.last < b.last;
  });
  ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
  return ranges;
}

HeldLayers held_layers(const Network& network, std::span<const LayerRange> ranges) {
  const auto layers = static_cast<int64_t>(network.layers.size());
  TRAINSIM_CHECK(
      network.cuts.size() == static_cast<size_t>(layers) + 1 && network.inputs.size() == network.layers.size(),
      "a linked network (link_network)");
  HeldLayers held;
  const uint8_t all = ranges.empty() ? 1 : 0;
  held.computes.assign(static_cast<size_t>(layers), all);
  held.tensors.assign(static_cast<size_t>(layers) + 1, all);
  held.cuts.assign(static_cast<size_t>(layers) + 1, all);
  const auto carry = [&](int64_t cut) {
    held.cuts[static_cast<size_t>(cut)] = 1;
    for (const int32_t t : network.cuts[static_cast<size_t>(cut)]) held.tensors[static_cast<size_t>(t) + 1] = 1;
  };
  for (const LayerRange& r : distinct_ranges({ranges.begin(), ranges.end()}, layers)) {
    for (int64_t i = r.first; i <= r.last; ++i) {
      held.computes[static_cast<size_t>(i)] = 1;
      held.tensors[static_cast<size_t>(i) + 1] = 1;
      for (const int32_t t : network.inputs[static_cast<size_t>(i)]) held.tensors[static_cast<size_t>(t) + 1] = 1;
    }
    carry(r.first);
    carry(r.last + 1);
  }
  return held;
}

}  // namespace trainsim
