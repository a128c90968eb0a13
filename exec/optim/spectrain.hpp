// SpecTrain weight prediction (seed 000 §3.3, eqs. 1-6; docs/equations.md §6): a
// stage keeps the smoothed gradient v and runs each forward and backward on
// the weights predicted for the time the mini-batch completes its round trip.
// The weights themselves are updated by plain SGD (seed 000 eq. 2, Algorithm
// 1 line 11): pair this class with Sgd at momentum 0.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exec/tensor/tensor.hpp"

namespace trainsim {

struct SpecTrainOptions {
  double learning_rate = 0;  // η of eq. 4, the same as the SGD step's
  double gamma = 0.9;        // decay factor γ of eq. 1, 0 < γ <= 1
};

// InputError naming "--set learning_rate" or "--set gamma" when out of range.
void validate_spectrain_options(const SpecTrainOptions& options);

class SpecTrain {
 public:
  explicit SpecTrain(SpecTrainOptions options);

  // Eq. 1, after each update with gradient g_t: v_t = γ·v_{t−1} + (1−γ)·g_t,
  // layers [first, last]. v starts at zero (Algorithm 1 line 1). A sparse
  // gradient is applied as its dense equivalent: every row of v decays, the
  // touched rows also take (1−γ)·g (repeats add). The untouched rows decay
  // lazily: a row keeps the step it was last brought up to date at and takes
  // the decays it missed, one multiplication each as the dense form does,
  // when it is next touched or read (the same bits, at the cost of the rows
  // a batch touches rather than of the whole table).
  void observe(const Weights& weights, const Gradients& grads, int64_t first, int64_t last);

  // Eq. 4: Ŵ_{t+s} = W_t − s·η·v_{t−1}, where v_{t−1} is the smoothed
  // gradient observed so far. Returns a copy of `weights` whose layers
  // [first, last] are predicted (the others copied unchanged); s = 0 returns
  // the weights as they are.
  Weights predict(const Weights& weights, int64_t version_difference, int64_t first, int64_t last) const;

  // Eq. 4 for layers [first, last] only, written into `out` in one pass over
  // W and v (no copy of the other layers, whose entries in `out` are left as
  // they were): a stage predicts its own layers into a buffer it reuses, so a
  // prediction costs one read of W and v and one write of Ŵ for the stage.
  void predict_into(const Weights& weights, int64_t version_difference, int64_t first, int64_t last,
                    Weights& out) const;

  // Which rows of which layers a prediction writes: `rows` of layer
  // `sparse_layer` only (an embedding's forward reads just its batch's rows),
  // and none of the layers `skip` marks (a backward that does not read them).
  // `rows` in any order; a repeated row is written again, to the same values.
  struct Only {
    int64_t sparse_layer = -1;
    std::span<const int64_t> rows;
    std::vector<uint8_t> skip;  // per layer; shorter means not skipped
  };
  void predict_into(const Weights& weights, int64_t version_difference, int64_t first, int64_t last, Weights& out,
                    const Only& only) const;

  // Eq. 5: version difference of a forward on stage k (0-based) of N: 2N − k − 2.
  static int64_t forward_version_difference(int64_t stages, int64_t stage);
  // Eq. 6: of a backward on stage k: k.
  static int64_t backward_version_difference(int64_t stages, int64_t stage);

  const SpecTrainOptions& options() const { return options_; }
  // v, shaped like the weights (empty for layers not yet observed), every row up to date.
  Weights smoothed_gradient() const;
  // Replaces v, e.g. to warm-start it or restore a checkpoint; shaped like the weights.
  void set_smoothed_gradient(Weights smoothed);

 private:
  // Row r of parameter p of layer l as of the layer's latest step.
  void catch_up(int64_t layer, size_t p, int64_t row, float* out) const;

  SpecTrainOptions options_;
  Weights smoothed_;                                   // v, a sparse table's rows as of row_steps_
  std::vector<int64_t> steps_;                         // per layer: observations so far
  std::vector<std::vector<std::vector<int64_t>>> row_steps_;  // per layer and sparse parameter: each row's step
};

}  // namespace trainsim
