// What a device over RangeNetworks keeps of its worker's training in a
// DeviceStore (range_network.hpp): the parameter gradients' sums its
// backwards add into (ParamGrad::kept), and the weights and velocity of
// the layers it steps (Device::step; a sparse table by the rows its
// gradient lists, sent up from the host), the host's weights of such a
// layer resident (Tensor::resident naming the kept weights, no data) until
// weights_to_host brings them back. The lending device (lending_device.cpp)
// holds one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/optim/spectrain.hpp"
#include "exec/tensor/device.hpp"
#include "exec/tensor/range_network.hpp"

namespace trainsim {

// Whether a host gradient holds anything but zeros (of either sign).
bool any_nonzero(std::span<const float> values);

class KeptTraining {
 public:
  explicit KeptTraining(std::shared_ptr<DeviceStore> store) : store_(std::move(store)) {}
  const std::shared_ptr<DeviceStore>& store() const { return store_; }

  // What a backward over layers [first, last] adds into: each dense
  // gradient's kept sum (made where it has none) as a resident tensor of
  // its shape; the sparse ones lent as they are, given back when this goes.
  class Targets {
   public:
    Targets(KeptTraining& kept, Gradients& grads, int64_t first, int64_t last);
    Targets(const Targets&) = delete;
    Targets& operator=(const Targets&) = delete;
    ~Targets();
    Gradients into;

   private:
    Gradients& grads_;
    int64_t first_, last_;
  };

  // Device::gradients_to_host: one wait, outside any lock of the caller's.
  void gradients_to_host(Gradients& grads, int64_t first, int64_t last);
  // Device::all_reduce_kept: the dense gradients of [first, last] (false,
  // nothing done, where one is sparse and not `dense_only`), a sum a part
  // of which the host holds brought there first, then those the host holds
  // alone taken up together, the host's values zeroed; their sums to `sum`.
  bool all_reduce(Gradients& grads, int64_t first, int64_t last, bool dense_only, const SumKept& sum);
  // A kept sum of [first, last] beside a part the host holds (the host wrote
  // into the set before a backward added to it again) brought to the host
  // to meet it, the two then summed there (kept_received.cpp).
  void bring_together(Gradients& grads, int64_t first, int64_t last);
  // Device::add_flat_gradients: each dense gradient of [first, last] whose
  // sum the device keeps adds its part of `flat` there (the parts taken up
  // together), the others theirs on the host; a kept sum beside a host part
  // comes to the host first, as all_reduce and step take them (kept_received.cpp).
  void add_flat(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last);
  // Device::scale_gradients: the kept sums scaled on the device, the rest on
  // the host, a kept sum beside a host part brought to the host first.
  void scale(Gradients& grads, float factor, int64_t first, int64_t last);
  // Device::take_flat_gradients: the dense gradients of [first, last] (false,
  // nothing done, where one is sparse and not `dense_only`) taken up
  // together from their parts of `flat` as their kept sums, each replacing
  // any it had, the host's values zeroed.
  bool take_flat(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last, bool dense_only);
  // Device::step of [first, last]: the host's weights and velocity taken
  // up where the device holds none yet; a sparse table's rows (a lazy
  // step, its rows made distinct on the host) sent up alone, a table whose
  // gradient lists none left as it is. With `spectrain`,
  // Device::step_spectrain: its smoothed gradient (taken up from the host's
  // likewise) observes the gradients first; false (nothing done) where one
  // is sparse.
  bool step(const Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last,
            const SpecTrain* spectrain = nullptr);
  // Device::predict_weights where the device keeps the weights of every
  // layer the prediction writes: false (nothing done) otherwise.
  bool predict(const SpecTrain& spectrain, const Weights& weights, int64_t version_difference, int64_t first,
               int64_t last, Weights& out, const SpecTrain::Only& only) const;
  // Device::weights_to_host (of weights, or of running statistics).
  void weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* sgd, SpecTrain* spectrain);
  // Device::update_statistics of batch normalization `layer` by the forward
  // `network` ran last: its running statistics (taken up from the host
  // where they are there) folded on the device, the host's resident.
  void fold_statistics(RangeNetwork& network, int64_t layer, LayerParams& statistics);
  // Device::copy_weights: the marked layers' kept weights copied on the
  // device (the copy resident), the others' host values copied.
  Weights copy_weights(const Weights& weights, std::span<const uint8_t> layers) const;
  // The kept weights of a layer's parameters whose host tensors are
  // resident, in order; empty where they are on the host.
  std::vector<KeptValues*> kept_weights(const LayerParams& params) const;

 private:
  // A kept value of this device's (ParamGrad::kept, Tensor::resident of a
  // weight); `taken` once a gradient's sum came to the host, so a copy of
  // the gradient cannot add it twice.
  struct Kept {
    const KeptTraining* owner;
    std::shared_ptr<KeptValues> values;
    bool taken = false;
  };
  std::shared_ptr<Kept> kept_of(const std::shared_ptr<void>& handle) const;

  using Param = std::pair<int64_t, size_t>;  // (layer, parameter)
  // The arrays of `kept` in [first, last], brought into `into` and let
  // go; where there is one, `into` starts as the host's values (`host()`),
  // a layer it lacks made shaped like the weights.
  void take_back(std::map<Param, std::shared_ptr<KeptValues>>& kept, int64_t first, int64_t last,
                 const Weights& weights, const std::function<Weights()>& host, Weights& into,
                 std::vector<std::shared_ptr<KeptValues>>& held, std::vector<KeptValues*>& arrays,
                 std::vector<std::span<float>>& spans);

  std::shared_ptr<DeviceStore> store_;
  mutable std::mutex mu_;  // velocity_, smoothed_, merge_
  // Per parameter the device steps: its velocity (momentum only), and
  // SpecTrain's smoothed gradient v.
  std::map<Param, std::shared_ptr<KeptValues>> velocity_, smoothed_;
  RowMerge merge_;  // a sparse table's repeated rows summed before its step
};

}  // namespace trainsim
