// The device a worker computes on: its layer kernels, its loss, and the
// gradient buffers it fills, over exec/tensor's tensors. The interpreter
// gives each worker its own (ExecOptions::make_device) and calls its kernels
// only through it. EigenCpuDevice runs exec/tensor's Eigen kernels on this
// machine's CPU; a CUDA device implements the same interface.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/tensor/layers.hpp"

namespace trainsim {

// Called from any of its worker's threads, one call at a time per gradient set.
class Device {
 public:
  virtual ~Device() = default;

  // Zeroed gradients shaped like `weights` (as zero_gradients).
  virtual Gradients zero_gradients(const Network& network, const Weights& weights) = 0;
  // Layers [first, last] forward; caches[i - first] receives layer i's cache
  // (as forward_range). x is the device's: a layer that keeps its input for
  // the backward takes it without a copy.
  virtual Tensor forward(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor x,
                         std::vector<LayerCache>& caches) = 0;
  // Backward from dL/d(output of last) to dL/d(input of first), adding into
  // `grads` (as backward_range). dy is the device's, as x of forward.
  virtual Tensor backward(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor dy,
                          const std::vector<LayerCache>& caches, Gradients& grads) = 0;
  // Layers [first, last] fold their training forward's caches into their
  // statistics (batch norm's running mean and variance; as update_statistics).
  virtual void update_statistics(const Network& network, int64_t first, int64_t last,
                                 const std::vector<LayerCache>& caches, Statistics& statistics) = 0;
  // Mean softmax cross-entropy of `logits` against `labels`, and dL/dlogits
  // into `dlogits` when not null (as softmax_cross_entropy).
  virtual double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) = 0;
};

// exec/tensor's Eigen kernels on this machine's CPU; stateless.
class EigenCpuDevice final : public Device {
 public:
  Gradients zero_gradients(const Network& network, const Weights& weights) override;
  Tensor forward(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor x,
                 std::vector<LayerCache>& caches) override;
  Tensor backward(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor dy,
                  const std::vector<LayerCache>& caches, Gradients& grads) override;
  void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                         Statistics& statistics) override;
  double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) override;
};

}  // namespace trainsim
