// EigenCpuDevice: exec/tensor's kernels, called as they are.
#include "exec/tensor/device.hpp"

#include <utility>

namespace trainsim {

Gradients EigenCpuDevice::zero_gradients(const Network& network, const Weights& weights) {
  return trainsim::zero_gradients(network, weights);
}

Tensor EigenCpuDevice::forward(const Network& network, const Weights& weights, int64_t first, int64_t last,
                               Tensor x, std::vector<LayerCache>& caches) {
  return forward_range(network, weights, first, last, std::move(x), caches);
}

Tensor EigenCpuDevice::backward(const Network& network, const Weights& weights, int64_t first, int64_t last,
                                Tensor dy, const std::vector<LayerCache>& caches, Gradients& grads) {
  return backward_range(network, weights, first, last, std::move(dy), caches, grads);
}

void EigenCpuDevice::update_statistics(const Network& network, int64_t first, int64_t last,
                                       const std::vector<LayerCache>& caches, Statistics& statistics) {
  trainsim::update_statistics(network, first, last, caches, statistics);
}

double EigenCpuDevice::loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) {
  return softmax_cross_entropy(logits, labels, dlogits);
}

}  // namespace trainsim
