// EigenCpuDevice: exec/tensor's kernels, called as they are.
#include "exec/tensor/device.hpp"

#include <algorithm>
#include <utility>

#include "model/error.hpp"

namespace trainsim {

Gradients EigenCpuDevice::zero_gradients(const Network& network, const Weights& weights) {
  return trainsim::zero_gradients(network, weights);
}

std::vector<int64_t> LoadedWeights::stale(const Weights& weights, WeightsGeneration generation, int64_t first,
                                          int64_t last) const {
  TRAINSIM_CHECK(
      first >= 0 && first <= last && static_cast<size_t>(last) < loaded_.size() && weights.size() == loaded_.size(),
      "a layer range of the loaded weights");
  std::vector<int64_t> out;
  for (int64_t l = first; l <= last; ++l) {
    const auto i = static_cast<size_t>(l);
    if (weights[i].empty()) continue;
    if (generation == kUnversionedWeights || loaded_[i] != generation) out.push_back(l);
  }
  return out;
}

void LoadedWeights::loaded(std::span<const int64_t> layers, WeightsGeneration generation) {
  for (const int64_t l : layers) loaded_.at(static_cast<size_t>(l)) = generation;
}

PendingLoss Device::forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation,
                                 PassId pass, int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                                 std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) {
  TRAINSIM_CHECK(last + 1 == static_cast<int64_t>(network.layers.size()), "a loss after a layer that is not the last");
  Tensor logits = forward(network, weights, generation, pass, first, last, std::move(x), caches);
  to_host(logits);
  const double mean = loss(logits, labels, &dlogits);
  for (float& v : dlogits.data) v *= dlogits_scale;
  return PendingLoss(mean);
}

Weights Device::copy_weights(Weights& weights, std::span<const uint8_t> layers) {
  weights_to_host(weights, 0, static_cast<int64_t>(weights.size()) - 1);
  Weights copy(weights.size());
  for (size_t l = 0; l < weights.size() && l < layers.size(); ++l) {
    if (layers[l] != 0) copy[l] = weights[l];
  }
  return copy;
}

void Device::to_host(Tensor& t) {
  TRAINSIM_CHECK(t.resident == nullptr && t.exported == nullptr, "a tensor on a device that keeps none");
}

bool Device::reaches(const Device& other) const {
  return shared_memory() >= 0 && shared_memory() == other.shared_memory();
}

std::shared_ptr<const ExportedBoundary> Device::boundary_array(int64_t) { return nullptr; }

Tensor Device::export_boundary(Tensor t) {
  to_host(t);
  return t;
}

void Device::add_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last) {
  gradients_to_host(grads, first, last);
  trainsim::add_flat_gradients(flat, grads, first, last);
}

void Device::scale_gradients(Gradients& grads, float factor, int64_t first, int64_t last) {
  gradients_to_host(grads, first, last);
  trainsim::scale_gradients(grads, factor, first, last);
}

void Device::step(Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last) {
  gradients_to_host(grads, first, last);
  sgd.step(weights, grads, first, last);
}

void Device::step_spectrain(Sgd& sgd, SpecTrain& spectrain, Weights& weights, Gradients& grads, int64_t first,
                            int64_t last) {
  gradients_to_host(grads, first, last);
  spectrain.observe(weights, grads, first, last);
  sgd.step(weights, grads, first, last);
}

void Device::predict_weights(SpecTrain& spectrain, Weights& weights, int64_t version_difference, int64_t first,
                             int64_t last, Weights& out, const SpecTrain::Only& only) {
  weights_to_host(weights, first, last, nullptr, &spectrain);
  for (int64_t l = first; l <= last && l < static_cast<int64_t>(out.size()); ++l) {
    for (Tensor& t : out[static_cast<size_t>(l)]) {
      if (t.resident != nullptr) t = Tensor();  // a prediction the device made: the host writes its own
    }
  }
  spectrain.predict_into(weights, version_difference, first, last, out, only);
}

void Device::weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* /*sgd*/, SpecTrain* /*spectrain*/) {
  for (int64_t l = std::max<int64_t>(first, 0); l <= last && l < static_cast<int64_t>(weights.size()); ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) {
      TRAINSIM_CHECK(t.resident == nullptr, "weights kept on a device that keeps none");
    }
  }
}

bool Device::all_reduce_kept(Gradients&, int64_t, int64_t, bool, const SumKept&) { return false; }

void Device::gradients_to_host(Gradients& grads, int64_t first, int64_t last) {
  for (int64_t l = std::max<int64_t>(first, 0); l <= last && l < static_cast<int64_t>(grads.size()); ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      TRAINSIM_CHECK(g.kept == nullptr, "a gradient kept on a device that keeps none");
    }
  }
}

namespace {

void check_on_host(const Tensor& t) {
  TRAINSIM_CHECK(t.resident == nullptr, "the CPU device given a tensor another device keeps");
}

}  // namespace

Tensor EigenCpuDevice::forward(const Network& network, const Weights& weights, WeightsGeneration /*generation*/,
                               PassId /*pass*/, int64_t first, int64_t last, Tensor x,
                               std::vector<LayerCache>& caches) {
  check_on_host(x);
  return forward_range(network, weights, first, last, std::move(x), caches);
}

Tensor EigenCpuDevice::backward(const Network& network, const Weights& weights, WeightsGeneration /*generation*/,
                                PassId /*pass*/, int64_t first, int64_t last, Tensor dy,
                                const std::vector<LayerCache>& caches, Gradients& grads) {
  check_on_host(dy);
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
