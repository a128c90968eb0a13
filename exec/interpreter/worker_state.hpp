// What each worker of the interpreter holds, and the host memory of a
// machine. Data moves by key: a worker keeps the output of layer l for
// (iteration, micro-batch) until the op that consumes it (its next forward,
// or a send) takes it, and likewise the gradient arriving at layer l's output.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/optim/spectrain.hpp"
#include "exec/tensor/device.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim::interp {

// Removes and returns what `map` holds under `key`: a tensor a later op
// consumes exactly once. Its absence is a plan the interpreter cannot run
// (`missing` says what never arrived). The caller holds the worker's lock.
template <class Map>
typename Map::mapped_type take(Map& map, const typename Map::key_type& key, const char* missing) {
  auto it = map.find(key);
  TRAINSIM_CHECK(it != map.end(), missing);
  typename Map::mapped_type value = std::move(it->second);
  map.erase(it);
  return value;
}

using Key = std::tuple<int32_t, int32_t, int32_t>;  // (iteration, micro-batch, layer)

// A stashed weight version: the layers its readers read, and the generation
// they hold (Device::forward's).
struct Snapshot {
  Weights weights;
  WeightsGeneration generation = kUnversionedWeights;
};

// Everything one worker holds. Its streams' threads share it under `mu`;
// weights are written only by its compute stream (updates) and by installs of
// received weights, which the plan orders before the ops that read them.
// A forward's loss (PendingLoss), its iteration and how many positions it
// is the mean over.
struct UnreadLoss {
  int32_t iteration = 0;
  int64_t positions = 0;
  PendingLoss loss;
};

struct WorkerState {
  Weights weights;                      // every layer (those the worker runs are the ones that move)
  Statistics statistics;                // every layer's (batch norm's running mean and variance)
  std::unique_ptr<Device> device;       // its kernels (ExecOptions::make_device)
  std::unique_ptr<Sgd> optimizer;
  std::unique_ptr<SpecTrain> spectrain; // dualpipe with spectrain: the smoothed gradient v
  Weights predicted;                    // SpecTrain: Ŵ of the compute op running, reused op after op
  int32_t version = 0;                  // updates applied so far
  // Counts every change of `weights` (an update, an install, a pull), for
  // the device (Device::forward's generation).
  WeightsGeneration generation = 1;
  std::map<int32_t, Snapshot> snapshots;  // stashed versions still to be read
  std::map<int32_t, int64_t> readers;   // compute ops yet to read each version
  std::map<int32_t, std::vector<int32_t>> layer_readers;  // per version and layer: those ops yet to read its parameters
  std::map<Key, Tensor> outputs;        // layer outputs awaiting their consumer
  std::map<Key, Tensor> output_grads;   // gradients w.r.t. layer outputs awaiting their backward
  std::map<Key, LayerCache> caches;     // per layer, from its forward (or recompute) to its backward
  std::map<Key, Tensor> inputs;         // (it, mb, first layer): a forward's input kept for its recompute
  std::map<int32_t, Gradients> grads;   // parameter gradients per iteration
  // Per iteration, its update ops not yet run: a worker of several model
  // chunks (interleaved 1F1B) steps each chunk's layers from the one set.
  std::map<int32_t, int32_t> updates_left;
  std::map<int32_t, std::vector<int64_t>> pulled_rows;  // per iteration: table rows asked of the servers
  std::vector<Gradients> spare_grads;   // applied sets kept for reuse, already zero
  int32_t grad_first = -1;              // the layers whose gradients the worker writes
  int32_t grad_last = -1;
  // Iterations without an update here (a parameter server's client): how
  // many gradient sends are still to read the set before it is released.
  std::map<int32_t, int32_t> gradient_sends_left;
  std::map<OpId, std::vector<float>> received;  // flat gradients or weights a recv brought
  // An update's new weights, for its sends, and how many of them are still to go.
  std::map<OpId, std::pair<std::vector<float>, int32_t>> weight_payloads;
  // Losses its device returned before they were known, in the order of
  // their forwards (under the interpreter's loss_mu_).
  std::vector<UnreadLoss> unread_losses;
  std::mutex mu;
};

// Every layer's weights the worker's device keeps, brought to the host
// (Device::weights_to_host); with `everything`, also the optimizer's
// velocity, SpecTrain's smoothed gradient and the running statistics it
// keeps (a run's state or result).
inline void weights_to_host(WorkerState& w, bool everything = false) {
  const auto last = [](const Weights& all) { return static_cast<int64_t>(all.size()) - 1; };
  w.device->weights_to_host(w.weights, 0, last(w.weights), everything ? w.optimizer.get() : nullptr,
                            everything ? w.spectrain.get() : nullptr);
  if (everything) w.device->weights_to_host(w.statistics, 0, last(w.statistics));
}

// Host memory of each machine (cgdp), keyed by the host accumulation a
// buffer belongs to (one per machine, chunk and iteration).
struct HostState {
  std::map<OpId, std::map<int32_t, std::vector<float>>> copies;  // accumulation -> worker -> its copy
  // accumulation -> the workers' mean (after the hosts' AllReduce, where
  // there is one), and how many of this process's workers are still to copy it back.
  std::map<OpId, std::pair<std::vector<float>, int64_t>> means;
  std::mutex mu;
};

}  // namespace trainsim::interp
