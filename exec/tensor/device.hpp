// The device a worker computes on: its layer kernels, its loss, and the
// gradient buffers it fills, over exec/tensor's tensors. The interpreter
// gives each worker its own (ExecOptions::make_device) and calls its kernels
// only through it. EigenCpuDevice runs exec/tensor's Eigen kernels on this
// machine's CPU; a CUDA device implements the same interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/optim/spectrain.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/tensor/pending_loss.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// Which values a worker's weights hold. Weights given with the same nonzero
// generation hold the same values in every layer whose parameters they
// carry, so a device that keeps a copy of them (a GPU's) need not load a
// layer again; kUnversionedWeights promises nothing (SpecTrain's
// predictions, computed op by op). The interpreter counts a worker's
// generations up from 1, one per change of its weights.
using WeightsGeneration = uint64_t;
inline constexpr WeightsGeneration kUnversionedWeights = 0;

// Which layers a device's copy of the weights must load again: the
// generation each layer's copy holds (none at first).
class LoadedWeights {
 public:
  explicit LoadedWeights(size_t layers) : loaded_(layers, kUnversionedWeights) {}
  // The layers of [first, last] whose parameters `weights` carries (a stash
  // carries only those its readers read) and whose copy holds another
  // generation; every such layer for kUnversionedWeights.
  std::vector<int64_t> stale(const Weights& weights, WeightsGeneration generation, int64_t first, int64_t last) const;
  // After those layers were copied: their copies hold `generation`.
  void loaded(std::span<const int64_t> layers, WeightsGeneration generation);

 private:
  std::vector<WeightsGeneration> loaded_;
};

// Which micro-batch's pass of a worker an op belongs to. A worker's ops of
// one pass (its forwards, recomputes and backwards of that micro-batch)
// may keep state on the device between them: a GPU's network, where the
// boundary one op leaves is the next one's input in place.
struct PassId {
  int32_t iteration = 0;
  int32_t microbatch = 0;
  auto operator<=>(const PassId&) const = default;
};

class KeptValues;

// A library AllReduce of arrays a device's store keeps (`floats` values in
// all), each summed over the members in place: Device::all_reduce_kept hands
// its gradients' sums to it.
using SumKept = std::function<void(std::span<KeptValues* const> arrays, int64_t floats)>;

// Called from any of its worker's threads, one call at a time per gradient set.
// The tensors forward, forward_loss and backward return may stay on the
// device (Tensor::resident): the interpreter gives them back to it as
// inputs, and calls to_host before reading one's values itself (a send).
class Device {
 public:
  virtual ~Device() = default;

  // The layer ranges this device's forwards, backwards and recomputes will
  // run (its worker's ops in the plan), told before the first: a device may
  // then hold memory for those layers and their boundaries alone
  // (held_layers.hpp); here nothing is held.
  virtual void hold_ranges(std::span<const LayerRange> /*ranges*/) {}
  // Zeroed gradients shaped like `weights` (as zero_gradients).
  virtual Gradients zero_gradients(const Network& network, const Weights& weights) = 0;
  // Layers [first, last] forward with `weights` of `generation` for
  // `pass`; caches[i - first] receives layer i's cache (as forward_range).
  // x is the device's: a layer that keeps its input for the backward takes
  // it without a copy.
  virtual Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                         int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) = 0;
  // Backward from dL/d(output of last) to dL/d(input of first), adding into
  // `grads` (as backward_range). dy is the device's, as x of forward.
  virtual Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                          int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                          Gradients& grads) = 0;
  // Layers [first, last] fold their training forward's caches into their
  // statistics (batch norm's running mean and variance; as update_statistics).
  virtual void update_statistics(const Network& network, int64_t first, int64_t last,
                                 const std::vector<LayerCache>& caches, Statistics& statistics) = 0;
  // Mean softmax cross-entropy of `logits` against `labels`, and dL/dlogits
  // into `dlogits` when not null (as softmax_cross_entropy).
  virtual double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) = 0;
  // Layers [first, last] forward as forward() does, `last` being the
  // model's last layer, then the loss of their logits against `labels` as
  // loss() does: the mean loss, and dL/dlogits times `dlogits_scale` into
  // `dlogits`. Here forward(), loss(), then the scaling, the loss known; a
  // device may compute the loss where it keeps the logits (a GPU's) and
  // return it before it is known, the host reading it later.
  virtual PendingLoss forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation,
                                   PassId pass, int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                                   std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits);
  // A tensor this device returned, its values brought into t.data (a no-op
  // for one already there). Here every tensor is on the host.
  virtual void to_host(Tensor& t);
  // Which memory this device's tensors stay in where another device reads
  // them in place: devices with the same id >= 0 (the virtual devices on one
  // GPU) pass boundaries by export_boundary. Here -1: through the host.
  virtual int64_t shared_memory() const { return -1; }
  // Whether a boundary this device returns goes to `other` device to device
  // (export_boundary): both keep tensors in one memory, or `other`'s memory
  // reads this one's (GPUs with peer access), the receiver then copying it
  // into its own before it reads it. Here: one shared_memory() >= 0.
  virtual bool reaches(const Device& other) const;
  // A boundary this device returned (a forward's output, a backward's
  // input gradient) for a device it reaches to take as its input: its
  // values copied into memory that device reads (Tensor::exported), the
  // host not waiting for them. Here to_host.
  virtual Tensor export_boundary(Tensor t);
  // A boundary a device that reaches this one exported for it
  // (export_boundary), taken in when received: one in another memory is
  // copied into this device's (a peer GPU's array onto this GPU), the copy
  // queued without the host waiting, so an op reading it later (and a
  // recompute reading it again) finds it here. Here t as it is.
  virtual Tensor import_boundary(Tensor t) { return t; }
  // An array of this device's memory that a boundary another process's
  // device passes to it is received into (Transport::take_kept), `floats`
  // values its first writer sets; null where the device keeps none (here).
  // A tensor exported with it (Tensor::exported) is this device's input.
  virtual std::shared_ptr<const ExportedBoundary> boundary_array(int64_t floats);
  // A backward may leave the parameter gradients it adds on the device
  // (ParamGrad::kept), where a worker's micro-batches sum them: this adds
  // the part kept of layers [first, last] of `grads` into their host values
  // and lets it go, on one wait. The interpreter calls it before the host
  // reads a set (a message, an update); a range holding no kept part is a
  // no-op. Here nothing is kept.
  virtual void gradients_to_host(Gradients& grads, int64_t first, int64_t last);
  // Where this device keeps the parameter gradients' sums (a GPU's store):
  // the dense gradients of layers [first, last] made whole there (a part the
  // host holds taken up, the host's values then zero), in flatten_gradients'
  // order, and handed together to `sum`, which sums them over the members
  // where they are (NCCL's AllReduce on the members' GPUs); true. False,
  // nothing done, where the range holds a sparse gradient and not
  // `dense_only` (with it, the sparse ones are left as they are), or where
  // the device keeps no sums (here): the caller then sums on the host.
  // Either way the members' values meet in one AllReduce of the same size.
  virtual bool all_reduce_kept(Gradients& grads, int64_t first, int64_t last, bool dense_only, const SumKept& sum);
  // A parameter server's gradients from another worker, `flat` in
  // add_flat_gradients' layout (layers [first, last], the sparse ones
  // densified by the caller), added into `grads`, and the mean of the
  // contributions (scale_gradients). A device may add and scale the sums
  // it keeps there, a sum of which the host holds a part brought to the
  // host first (as seed 003 §2.3's device server sums on the device); here
  // the gradients come to the host and both run there.
  virtual void add_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last);
  virtual void scale_gradients(Gradients& grads, float factor, int64_t first, int64_t last);
  // `flat` (flatten_gradients' layout: the dense gradients of [first, last])
  // as their values, the sum of a host's AllReduce or accumulation coming
  // back: a device keeping gradient sums takes them up as its sums, the
  // host's values then zero (seed 003 §3.1 B-4-4's copy back), and its
  // update reads them there; true. False, nothing done, where the device
  // keeps no sums (here) or, unless `dense_only`, a gradient of the range
  // is sparse: the caller then writes the host's values.
  virtual bool take_flat_gradients(std::span<const float> /*flat*/, Gradients& /*grads*/, int64_t /*first*/,
                                   int64_t /*last*/, bool /*dense_only*/) {
    return false;
  }
  // One step of `sgd` on layers [first, last] of `weights` by `grads`
  // (Sgd::step). A device may step a copy of its own of a layer's weights
  // and of the optimizer's velocity (a GPU's, by the gradient sums it
  // keeps; a sparse table by the rows its gradient lists, sent up from the
  // host): the host's weights of the layer then stay on the device
  // (Tensor::resident, no data) until weights_to_host, and the host's
  // velocity goes stale. Here the gradients come to the host and sgd.step
  // runs.
  virtual void step(Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last);
  // SpecTrain's update of layers [first, last] (seed 000 eqs. 1-2):
  // `spectrain` observes the gradients (its smoothed gradient v) and `sgd`
  // (momentum 0) steps the weights. A device may do both on its own copies
  // of the weights and of v, as step does, the host's v then stale until
  // weights_to_host. Here the gradients come to the host, spectrain
  // observes them and sgd steps.
  virtual void step_spectrain(Sgd& sgd, SpecTrain& spectrain, Weights& weights, Gradients& grads, int64_t first,
                              int64_t last);
  // SpecTrain's prediction (eq. 4) of layers [first, last] of `weights`
  // `version_difference` versions ahead into `out`, as
  // SpecTrain::predict_into with `only`. A device that keeps those layers'
  // weights and v may predict them on its own copies, out's tensors of them
  // then resident (read by this device's forwards and backwards only).
  // Here the host's weights and v, brought back first.
  virtual void predict_weights(SpecTrain& spectrain, Weights& weights, int64_t version_difference, int64_t first,
                               int64_t last, Weights& out, const SpecTrain::Only& only);
  // The weights of layers [first, last] a step left on the device brought
  // back into `weights` (one wait), or the running statistics of batch
  // normalization that update_statistics left there; with `sgd`, also the
  // velocity the device keeps of those layers, into sgd, and with
  // `spectrain` the smoothed gradient, and the device lets them go. The
  // interpreter calls it before the host reads or writes a worker's
  // weights. Here nothing is kept.
  virtual void weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* sgd = nullptr,
                               SpecTrain* spectrain = nullptr);
  // A copy of the layers of `weights` that `layers` marks (the others
  // left empty) for this device's later forwards and backwards to read (a
  // stashed weight version). A device may copy the weights it keeps into
  // memory of its own, the copy's tensors resident there (no data, read by
  // no one else); here the weights come to the host and are copied.
  virtual Weights copy_weights(Weights& weights, std::span<const uint8_t> layers);
  // An op's work timed where it runs, for a device that runs it after the
  // host queues it (a GPU's kernels): the compute op whose work the calls
  // that follow on its worker's compute stream queue (-1: none). A device
  // whose work is done when a call returns (here) times nothing.
  virtual void time_work_of(int64_t /*op*/) {}
  struct WorkTime {
    int64_t op = -1;
    double start_s = 0;  // the op's first work began, in seconds of the host's monotonic clock
    double end_s = 0;    // its last ended
  };
  // The ops whose work this device timed; waits for that work.
  virtual std::vector<WorkTime> work_times() { return {}; }
  // The most memory this device's work held and its limit (-1: none),
  // where it counts them (a GPU worker's: MemoryBudget); here neither (-1).
  struct MemoryUse {
    int64_t peak_bytes = -1;
    int64_t limit_bytes = -1;
  };
  virtual MemoryUse memory_use() const { return {}; }
};

// exec/tensor's Eigen kernels on this machine's CPU, on the weights as
// given (the generation and the pass unused); stateless.
class EigenCpuDevice final : public Device {
 public:
  Gradients zero_gradients(const Network& network, const Weights& weights) override;
  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override;
  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override;
  void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                         Statistics& statistics) override;
  double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) override;
};

}  // namespace trainsim
