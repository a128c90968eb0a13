// DSP's forward and backward parameters (seed 001 §3.1-3.3, eq. 5;
// docs/equations.md §8). Block k runs a batch's forward on its Forward Parameters
// x_k^{t_k} and, Δt_k updates later, its backward on its newer Backward
// Parameters x_k^{t_{2K-1-k}}. The DSP gradient (eq. 5) differentiates
// F(h_0; x_0^{t_0}; ...; x_{k-1}^{t_{k-1}}; x_k^{t_{2K-1-k}}): the lower
// blocks' forward parameters enter only through the input h_k the block
// received, so the block keeps that input and recomputes its own forward on
// the backward parameters before backpropagating.
#pragma once

#include <cstdint>
#include <map>

#include "exec/tensor/layers.hpp"

namespace trainsim {

// What a block's backward returns.
struct DspBackward {
  Tensor input_grad;           // G_{h_k}, sent to block k−1
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
  DspStage(const Network& network, int64_t first, int64_t last);

  // Forward of `batch` on the forward parameters `weights` (version
  // `version`): keeps `input` and returns h_{k+1} = f_k(h_k; x_k^{t_k}).
  Tensor forward(const Weights& weights, int64_t version, int64_t batch, const Tensor& input);

  // Backward of `batch` on the backward parameters `weights` (version
  // `version`) with G_{h_{k+1}} = `output_grad`: recomputes the block's
  // forward from the kept input on `weights`, backpropagates through it,
  // ADDS G_{x_k} into `grads` and returns G_{h_k} (eq. 5). Forgets the batch.
  DspBackward backward(const Weights& weights, int64_t version, int64_t batch, const Tensor& output_grad,
                       Gradients& grads);

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
