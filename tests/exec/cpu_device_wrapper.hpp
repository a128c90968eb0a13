// A test device that runs exec's CPU kernels as they are and lets a test
// override the calls it looks at (counting them, computing on a copy of
// the weights).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exec/tensor/device.hpp"

namespace trainsim {

class CpuDeviceWrapper : public Device {
 public:
  Gradients zero_gradients(const Network& network, const Weights& weights) override {
    return cpu_.zero_gradients(network, weights);
  }
  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    return cpu_.forward(network, weights, generation, pass, first, last, std::move(x), caches);
  }
  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override {
    return cpu_.backward(network, weights, generation, pass, first, last, std::move(dy), caches, grads);
  }
  void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                         Statistics& statistics) override {
    cpu_.update_statistics(network, first, last, caches, statistics);
  }
  double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) override {
    return cpu_.loss(logits, labels, dlogits);
  }

 private:
  EigenCpuDevice cpu_;
};

}  // namespace trainsim
