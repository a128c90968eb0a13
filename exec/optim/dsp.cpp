// DSP block: keeps each in-flight batch's input, recomputes on the backward
// parameters at backward time (seed 001 eq. 5).
#include "exec/optim/dsp.hpp"

#include <string>
#include <utility>

#include "model/error.hpp"

namespace trainsim {

DspStage::DspStage(const Network& network, int64_t first, int64_t last)
    : network_(network), first_(first), last_(last) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(network.layers.size()),
                 "DSP block outside the network");
}

Tensor DspStage::forward(const Weights& weights, int64_t version, int64_t batch, const Tensor& input) {
  auto [it, inserted] = in_flight_.try_emplace(batch, InFlight{input, version});
  TRAINSIM_CHECK(inserted, "DSP batch " + std::to_string(batch) + " forwarded twice");
  // The caches are dropped here: the backward rebuilds them by recomputation.
  std::vector<LayerCache> caches;
  return forward_range(network_, weights, first_, last_, it->second.input, caches);
}

DspBackward DspStage::backward(const Weights& weights, int64_t version, int64_t batch, const Tensor& output_grad,
                               Gradients& grads) {
  auto node = in_flight_.extract(batch);
  TRAINSIM_CHECK(!node.empty(), "DSP batch " + std::to_string(batch) + " is not in flight");
  const InFlight& kept = node.mapped();
  TRAINSIM_CHECK(version >= kept.forward_version, "backward parameters older than the forward's");
  // Eq. 5: recompute F(h_k; x_k^{t_{2K-1-k}}) from the kept h_k, then
  // differentiate it with respect to the backward parameters and to h_k.
  std::vector<LayerCache> caches;
  forward_range(network_, weights, first_, last_, kept.input, caches);
  Tensor input_grad = backward_range(network_, weights, first_, last_, output_grad, caches, grads);
  return {std::move(input_grad), version - kept.forward_version};
}

}  // namespace trainsim
