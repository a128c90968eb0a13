// Inside the lending device (lending_device.cpp): the networks it lends,
// the leases its passes hold on them, and what holds a lease (a layer's
// cache, a tensor left in a network's buffers).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exec/tensor/kept_training.hpp"
#include "exec/tensor/lending_device.hpp"
#include "model/error.hpp"

namespace trainsim::lending {

// A lent network and the generations its weights' layers hold (shared
// with no one but the device's note of the network its last range ran on,
// which must not outlive it: a network past the budget drops idle ones).
struct Lent {
  std::shared_ptr<RangeNetwork> network;
  LoadedWeights loaded;

  // The layers of [first, last] that hold another generation get `weights`
  // (from the device where a step left them there).
  void load(const Weights& weights, WeightsGeneration generation, int64_t first, int64_t last,
            const KeptTraining* kept) {
    const std::vector<int64_t> stale = loaded.stale(weights, generation, first, last);
    std::vector<int64_t> from_host;  // loaded together
    for (const int64_t l : stale) {
      const std::vector<KeptValues*> on_device =
          kept == nullptr ? std::vector<KeptValues*>{} : kept->kept_weights(weights[static_cast<size_t>(l)]);
      if (on_device.empty()) {
        from_host.push_back(l);
      } else {
        network->load_kept_weights(l, on_device);
      }
    }
    if (!from_host.empty()) network->load_layers(weights, from_host);
    loaded.loaded(stale, generation);
  }
};

// The networks a device lends, by batch size; shared with the leases, which
// may end on any thread.
struct Pool {
  MakeRangeNetwork make;
  std::shared_ptr<DeviceStore> store;      // the device's, whose idle arrays go before a network that would not fit
  std::vector<LayerRange> ranges;          // the worker's (Device::hold_ranges); none: every layer
  std::shared_ptr<const HeldLayers> held;  // of them, once a network is made
  std::mutex mu;
  std::map<int64_t, std::vector<Lent>> idle;
};

struct Resident;

// A network lent to one pass, back to the pool when the last cache or
// tensor holding it goes.
struct Lease {
  std::shared_ptr<Pool> pool;
  Lent lent;
  PassId pass;
  std::vector<std::atomic<int32_t>> live;          // per layer: its caches still held
  std::vector<std::weak_ptr<Resident>> residents;  // tensors left in its buffers (under the device's lock)
  Lease(std::shared_ptr<Pool> p, Lent l, PassId for_pass, size_t layers)
      : pool(std::move(p)), lent(std::move(l)), pass(for_pass), live(layers) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    std::lock_guard lock(pool->mu);
    pool->idle[lent.network->batch()].push_back(std::move(lent));
  }
  // No cache of layer `first` or after is held: a forward from `first`
  // overwrites nothing a backward still reads.
  bool free_from(int64_t first) const {
    for (size_t l = static_cast<size_t>(first); l < live.size(); ++l) {
      if (live[l].load() > 0) return false;
    }
    return true;
  }
};

// The pool's idle networks let go (each once its work is done), to make
// room for a network or a store's array.
inline void drop_idle(Pool& pool) {
  std::map<int64_t, std::vector<Lent>> dropped;
  {
    std::lock_guard lock(pool.mu);
    std::swap(dropped, pool.idle);
  }
}

// A lease for `pass` on an idle network of `batch` rows, or on a new one.
inline std::shared_ptr<Lease> fresh(const std::shared_ptr<Pool>& pool, const Network& network, PassId pass,
                                    int64_t batch) {
  const size_t layers = network.layers.size();
  {
    std::lock_guard lock(pool->mu);
    std::vector<Lent>& idle = pool->idle[batch];
    if (!idle.empty()) {
      Lent lent = std::move(idle.back());
      idle.pop_back();
      return std::make_shared<Lease>(pool, std::move(lent), pass, layers);
    }
  }
  std::shared_ptr<const HeldLayers> held;
  {
    std::lock_guard lock(pool->mu);
    if (pool->held == nullptr) pool->held = std::make_shared<const HeldLayers>(held_layers(network, pool->ranges));
    held = pool->held;
  }
  std::unique_ptr<RangeNetwork> made;
  try {
    made = pool->make(network, batch, *held);
  } catch (const MemoryBudgetExceeded&) {
    // Past the worker's share: what it keeps for reuse goes first (its idle
    // networks, of any batch size; its store's idle arrays), then once more.
    drop_idle(*pool);
    if (pool->store != nullptr) pool->store->free_idle();
    made = pool->make(network, batch, *held);
  }
  Lent lent{std::move(made), LoadedWeights(layers)};
  TRAINSIM_CHECK(lent.network->batch() == batch, "a network of another batch size");
  return std::make_shared<Lease>(pool, std::move(lent), pass, layers);
}

// One layer's cache (LayerCache::device_state), holding its network.
struct CacheHold {
  std::shared_ptr<Lease> lease;
  size_t layer;
  CacheHold(std::shared_ptr<Lease> l, size_t at) : lease(std::move(l)), layer(at) { ++lease->live[layer]; }
  CacheHold(const CacheHold&) = delete;
  CacheHold& operator=(const CacheHold&) = delete;
  ~CacheHold() { --lease->live[layer]; }
};

// A tensor left in a network's buffers (Tensor::resident): cut `cut`'s
// values, or its gradients. Before another op overwrites them, they are
// set aside (then `lease` is let go): into an array of the device's store
// (`exported`), else to the host; to_host brings them to `host`.
struct Resident {
  const void* device;
  const Network* network;
  std::shared_ptr<Lease> lease;
  int64_t cut;
  bool gradient;
  Tensor host;
  std::shared_ptr<const ExportedBoundary> exported;
};

// A tensor of `shape` whose values are `exported`'s (Tensor::exported).
inline Tensor with_exported(const std::vector<int64_t>& shape, std::shared_ptr<const ExportedBoundary> exported) {
  Tensor out;
  out.shape = shape;
  out.exported = std::move(exported);
  return out;
}

// r's values to the host (from the buffers or the array it was set aside
// into), its network let go. Callers hold the device's lock.
inline void bring_back(Resident& r, const std::vector<int64_t>& shape) {
  if (r.lease != nullptr) {
    RangeNetwork& net = *r.lease->lent.network;
    r.host = r.gradient ? net.cut_gradients(*r.network, r.cut) : net.cut_values(*r.network, r.cut);
    r.lease.reset();
  } else if (r.exported != nullptr) {
    r.host = with_exported(shape, std::move(r.exported));
    exported_to_host(r.host);
  }
}

}  // namespace trainsim::lending
