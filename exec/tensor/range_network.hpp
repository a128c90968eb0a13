// A network that keeps a whole model's activations in buffers of its own (a
// GPU's: CudaNetwork) and runs the interpreter's ops over layer ranges in
// them, so a boundary one range leaves in its buffers is the next range's
// input in place. The lending device (lending_device.hpp) lends such
// networks to a worker's passes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/tensor/pending_loss.hpp"

namespace trainsim {

// Values a device keeps in the memory its RangeNetworks compute in: a
// parameter gradient's sum (ParamGrad::kept), where each backward adds its
// share, or a worker's weights and velocity of one parameter, which the
// device steps (Device::step).
class KeptValues {
 public:
  virtual ~KeptValues() = default;
};

// Where a device keeps such values (a GPU's memory): any of its networks
// reads and adds into them, and the host's copies come and go together.
class DeviceStore {
 public:
  virtual ~DeviceStore() = default;
  // `floats` zeros.
  virtual std::shared_ptr<KeptValues> zeros(int64_t floats) = 0;
  // Frees the arrays let go that it keeps to lend again (a GPU's pool),
  // once their last work is done; here none are kept.
  virtual void free_idle() {}
  // What frees more of the budget its arrays charge (its device's idle
  // networks), called, where an array would still pass the budget once its
  // own idle arrays are freed, before the array is tried once more; set
  // once, before the store makes any array. Here no array is refused.
  virtual void when_full(std::function<void()> make_room) { (void)make_room; }
  // `floats` values its first writer sets, ordered after the array's last
  // work as any writer is (a GPU's: nothing queued on the store's stream);
  // here zeros.
  virtual std::shared_ptr<KeptValues> uninitialized(int64_t floats) { return zeros(floats); }
  // A copy of `values`.
  virtual std::shared_ptr<KeptValues> from_host(std::span<const float> values) = 0;
  // A copy of each, together (a GPU's in one pass through pinned memory);
  // here one from_host each.
  virtual std::vector<std::shared_ptr<KeptValues>> from_host_all(std::span<const std::span<const float>> values) {
    std::vector<std::shared_ptr<KeptValues>> out;
    for (const std::span<const float> v : values) out.push_back(from_host(v));
    return out;
  }
  // into[i] += kept[i] (add), or = kept[i], for each, after all work on
  // them, on one wait.
  virtual void to_host(std::span<KeptValues* const> kept, std::span<const std::span<float>> into, bool add) = 0;
  // A copy of `values` (after all work on them): values this store keeps,
  // or another store's where this one's memory reads that one's (a peer
  // GPU's: a boundary passed between devices that reach each other).
  virtual std::shared_ptr<KeptValues> copy(KeptValues& values) = 0;
  // SpecTrain's eq. 1 (exec/optim/spectrain.hpp): smoothed = gamma·smoothed
  // + rest·grad.
  virtual void smooth(KeptValues& smoothed, KeptValues& grad, float gamma, float rest) = 0;
  // sum = (sum + values)·scale, or sum·scale where `values` is null: a
  // parameter server's gradients added into the kept sum one sender at a
  // time, then their mean (add_flat_gradients', scale_gradients' order).
  virtual void add_scaled(KeptValues& sum, KeptValues* values, float scale) = 0;
  // SpecTrain's eq. 4: weights − step·smoothed, a new array.
  virtual std::shared_ptr<KeptValues> predict(KeptValues& weights, KeptValues& smoothed, float step) = 0;
  // Sgd::step of one dense parameter (exec/optim/sgd.hpp): weights by
  // `grad`, `velocity` null where the momentum is 0.
  virtual void sgd_step(KeptValues& weights, KeptValues& grad, KeptValues* velocity, const SgdOptions& options) = 0;
  // The same step of several parameters, as one piece of work where the
  // device can (a GPU's: a launch per few dozen); here sgd_step each.
  struct SgdArrays {
    KeptValues* weights = nullptr;
    KeptValues* grad = nullptr;
    KeptValues* velocity = nullptr;
  };
  virtual void sgd_step_all(std::span<const SgdArrays> params, const SgdOptions& options) {
    for (const SgdArrays& p : params) sgd_step(*p.weights, *p.grad, p.velocity, options);
  }
  // Sgd's lazy step of a sparse table kept here, rows of `width`: each of
  // the `count` rows `rows` lists (distinct, in the table: rows_to_step's;
  // each int64 index in two floats' bytes) by its gradient's sum in
  // `values` (count x width; both arrays may hold more, the first count
  // rows read), the other rows and their velocity as they are; `velocity`
  // null where the momentum is 0. All four kept here.
  virtual void sgd_step_rows(KeptValues& weights, KeptValues* velocity, KeptValues& rows, KeptValues& values,
                             int64_t count, int64_t width, const SgdOptions& options) = 0;
};

// A boundary's values copied into an array of a DeviceStore (RangeNetwork::
// export_cut): the cut's tensors side by side in each sample's row, as
// packed_boundary packs them. A network of any device on the same memory
// reads it as a range's input (Tensor::exported), a device of another
// memory that reads this one copies it into its own store first
// (DeviceStore::copy); `store` brings it to the host. `memory` is the
// exporting device's (Device::shared_memory).
struct ExportedBoundary {
  std::shared_ptr<DeviceStore> store;
  std::shared_ptr<KeptValues> values;
  int64_t memory = -1;
};

// t's exported values brought into t.data (packed), t.exported let go; a
// no-op for a tensor not exported.
void exported_to_host(Tensor& t);

// A point in the work a network queues, timed once the work before it is
// done: where that work runs after the host queues it (a GPU's kernels), a
// CUDA event recorded on the network's stream.
class WorkMark {
 public:
  virtual ~WorkMark() = default;
  // Whether the work queued before the mark is done; never waits.
  virtual bool done() = 0;
  // When that work was done, in seconds of the host's monotonic clock
  // (model/clock.hpp); waits for it.
  virtual double done_s() = 0;
  // Seconds from `earlier` (a mark of a network of the same memory) to this
  // one, finer than the difference of their done_s; waits for both.
  virtual double seconds_since(WorkMark& earlier) = 0;
};

class RangeNetwork {
 public:
  virtual ~RangeNetwork() = default;
  // The batch its buffers hold.
  virtual int64_t batch() const = 0;
  // Layers [first, last] of the weights into its own copy.
  virtual void load_weights(const Weights& weights, int64_t first, int64_t last) = 0;
  // The listed layers of the weights likewise, together where the network
  // can (a GPU's: through one staging); here each by load_weights.
  virtual void load_layers(const Weights& weights, std::span<const int64_t> layers) {
    for (const int64_t l : layers) load_weights(weights, l, l);
  }
  // The cut before `first` from x (a lone tensor, or the cut's tensors as
  // parts or packed side by side, as network_range.cpp passes them; or
  // exported by a network of a device on the same memory, Tensor::exported,
  // copied from there; null: the buffers hold it already, left by this
  // network's last range before it), then the range's forward; its output
  // stays in the buffers.
  virtual void forward_range(const Network& network, int64_t first, int64_t last, const Tensor* x) = 0;
  // The same, `last` being the model's last layer, then the softmax
  // cross-entropy of the logits against `labels`: the mean loss (a GPU's
  // still being computed when it returns), and dL/dlogits times
  // `dlogits_scale` left in the buffers (the gradient of cut `last` + 1)
  // for the backward. Reading the loss needs neither the network nor its
  // buffers (a later range may have overwritten them).
  virtual PendingLoss forward_range_loss(const Network& network, int64_t first, int64_t last, const Tensor* x,
                                         std::span<const int32_t> labels, float dlogits_scale) = 0;
  // Per layer of [first, last]: a batch normalization's mean and biased
  // variance per channel over its last forward; empty for any other layer.
  virtual std::vector<std::vector<Tensor>> batch_statistics(int64_t first, int64_t last) const = 0;
  // dL/d(the cut after `last`) from dy (as forward_range's x; null: the
  // buffers hold it), the
  // range's backward over its last forward's activations, its parameter
  // gradients ADDED into `grads`: into the sum a dense gradient's tensor
  // names where it is resident (a KeptValues of this network's
  // DeviceStore), else into its host values; dL/d(the cut before
  // `first`) stays in the buffers.
  virtual void backward_range(const Network& network, int64_t first, int64_t last, const Tensor* dy,
                              Gradients& grads) = 0;
  // Batch normalization `layer` folds the batch statistics of its last
  // forward into running ones kept by this network's DeviceStore (as its
  // ExecLayer::update_statistics, kBatchNormMomentum).
  virtual void fold_statistics(int64_t layer, KeptValues& running_mean, KeptValues& running_variance) = 0;
  // Layer `layer`'s weights into its own copy from `params` (one per
  // parameter, kept by this network's DeviceStore), as load_weights from
  // the host.
  virtual void load_kept_weights(int64_t layer, std::span<KeptValues* const> params) = 0;
  // Cut `i`'s values or gradients as the buffers hold them, as a range
  // pass gives a boundary: a lone tensor, or the cut's tensors as parts.
  virtual Tensor cut_values(const Network& network, int64_t i) = 0;
  virtual Tensor cut_gradients(const Network& network, int64_t i) = 0;
  // Cut `i`'s values (or gradients) as the buffers hold them copied into a
  // new array of `store` (packed as ExportedBoundary says; zeros where a
  // gradient's buffer is missing), after the work queued before and
  // without waiting for it, for a network of another device on the same
  // memory to read (forward_range's x, backward_range's dy).
  virtual std::shared_ptr<KeptValues> export_cut(const Network& network, int64_t i, bool gradient,
                                                 DeviceStore& store) = 0;
  // The work this network is given next waits for the work queued so far
  // on `previous`, another network lent by the same device, without the
  // host waiting: a GPU network's stream waits for an event of the other's.
  // Nothing here, where a call's work is done when it returns.
  virtual void queue_after(RangeNetwork& /*previous*/) {}
  // The work this network is given next waits, without the host, for x's
  // values where they are in an array of a store (Tensor::exported): a GPU
  // network's stream for the array's last work. Nothing here, where that
  // work is done when the call that queued it returns.
  virtual void wait_for(const Tensor& /*x*/) {}
  // A mark after the work queued on this network so far; null where a
  // call's work is done when it returns (the host's clock times it then).
  virtual std::shared_ptr<WorkMark> mark() { return nullptr; }
};

}  // namespace trainsim
