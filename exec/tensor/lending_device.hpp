// A device over RangeNetworks (a GPU's CudaNetworks): it lends a network to
// one pass of its worker (an iteration's micro-batch) until the pass's
// caches and the tensors left in its buffers go, so the ops of a pass share
// it and a boundary one op leaves is the next one's input in place
// (Tensor::resident); a tensor another op may overwrite first is set aside
// into an array of the device's store (copied on the device, then read from
// there), or goes to the host without a store. A network loads a layer's weights only when its copy holds another
// generation of them (LoadedWeights), from the device's own copy where a
// step left them there. The loss is the network's; the parameter gradients
// sum where the networks compute until the host reads them, and the
// optimizer steps there and batch normalization's running statistics fold
// there (a DeviceStore); without a store, a forward's batch statistics come
// back as exec's batch norm keeps them. A boundary sent to a device on the
// same memory goes there without the host.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "exec/tensor/device.hpp"
#include "exec/tensor/held_layers.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "exec/tensor/range_network.hpp"

namespace trainsim {

// A new network of `batch` rows for `network`'s model, holding what `held`
// says its passes touch (a worker's stage: Device::hold_ranges; every layer
// where no ranges were told).
using MakeRangeNetwork =
    std::function<std::unique_ptr<RangeNetwork>(const Network& network, int64_t batch, const HeldLayers& held)>;

// With a `store`, a backward adds its dense parameter gradients into sums
// kept there (ParamGrad::kept) until Device::gradients_to_host, and a step
// of a dense range runs there on weights and velocity kept there until
// Device::weights_to_host (kept_training.hpp); without one, gradients and
// steps are the host's. With a store and `shared_memory` >= 0 (the GPU its
// networks and store compute on), a boundary sent to a device of the same
// shared_memory, or of a memory `reaches` says reads this one's (a peer
// GPU), goes through an array of the store (Device::export_boundary,
// RangeNetwork::export_cut) instead of the host; one received from such a
// device of another memory is copied into an array of this store
// (DeviceStore::copy) before a network reads it.
// `budget`, where given, is what its networks and store charge (they hold
// it; Device::memory_use reports it).
using ReachesMemory = std::function<bool(int64_t other)>;
std::unique_ptr<Device> make_lending_device(MakeRangeNetwork make_network, std::shared_ptr<DeviceStore> store = nullptr,
                                            int64_t shared_memory = -1, ReachesMemory reaches = nullptr,
                                            std::shared_ptr<const MemoryBudget> budget = nullptr);

}  // namespace trainsim
