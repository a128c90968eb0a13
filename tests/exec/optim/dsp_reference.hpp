// A reference model of DSP's forward and backward parameters (seed 001
// §3.1-3.3, eq. 5; docs/equations.md §8), for the tests: the interpreter runs
// DSP from the plan's ops (a forward keeps its input, a Recompute op rebuilds
// the caches on the backward parameters, the backward uses them;
// exec/interpreter/compute_ops.cpp), and the tests check it against this
// emulation written straight from the paper.
//
// Block k runs a batch's forward on its Forward Parameters x_k^{t_k} and,
// Δt_k updates later, its backward on its newer Backward Parameters
// x_k^{t_{2K-1-k}}. The DSP gradient (eq. 5) differentiates
// F(h_0; x_0^{t_0}; ...; x_{k-1}^{t_{k-1}}; x_k^{t_{2K-1-k}}): the lower
// blocks' forward parameters enter only through the input h_k the block
// received, so the block keeps that input and recomputes its own forward on
// the backward parameters before backpropagating.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim {

// What a block's backward returns.
struct DspBackward {
  Tensor input_grad;             // G_{h_k}, sent to block k−1
  int64_t layer_wise_staleness;  // Δt_k = backward version − forward version
};

// One DSP block: layers [first, last] of `network` (which must outlive it).
// Per in-flight batch it keeps the input h_k (computed by the lower blocks
// with their forward parameters) and the version of its own forward
// parameters; its own forward parameters are not kept, because eq. 5 uses
// the block's backward parameters for the whole recomputed block. Neither are
// the forward's layer caches: recomputation rebuilds them (seed 001 §3.3).
class DspStage {
 public:
  DspStage(const Network& network, int64_t first, int64_t last) : network_(network), first_(first), last_(last) {
    TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(network.layers.size()),
                   "DSP block outside the network");
  }

  // Forward of `batch` on the forward parameters `weights` (version
  // `version`): keeps `input` and returns h_{k+1} = f_k(h_k; x_k^{t_k}).
  Tensor forward(const Weights& weights, int64_t version, int64_t batch, const Tensor& input) {
    auto [it, inserted] = in_flight_.try_emplace(batch, InFlight{input, version});
    TRAINSIM_CHECK(inserted, "DSP batch " + std::to_string(batch) + " forwarded twice");
    // The caches are dropped here: the backward rebuilds them by recomputation.
    std::vector<LayerCache> caches;
    return forward_range(network_, weights, first_, last_, it->second.input, caches);
  }

  // Backward of `batch` on the backward parameters `weights` (version
  // `version`) with G_{h_{k+1}} = `output_grad`: recomputes the block's
  // forward from the kept input on `weights`, backpropagates through it,
  // ADDS G_{x_k} into `grads` and returns G_{h_k} (eq. 5). Forgets the batch.
  DspBackward backward(const Weights& weights, int64_t version, int64_t batch, const Tensor& output_grad,
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

  // Inputs kept, one per batch between its forward and its backward.
  int64_t inputs_held() const { return static_cast<int64_t>(in_flight_.size()); }

 private:
  struct InFlight {
    Tensor input;             // h_k
    int64_t forward_version;  // t_k, in updates of this block
  };

  const Network& network_;
  int64_t first_;
  int64_t last_;
  std::map<int64_t, InFlight> in_flight_;  // by batch
};

}  // namespace trainsim
