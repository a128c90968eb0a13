// SGD and momentum SGD on a layer range of Weights, plus the gradient
// utilities the interpreter needs around them: add, scale, clear, densify,
// and flatten a range's dense gradients into one float buffer (AllReduce,
// chunks) and back. Every function taking gradients accepts sparse ones.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exec/tensor/sparse_rows.hpp"
#include "exec/tensor/tensor.hpp"

namespace trainsim {

// PyTorch's SGD convention (torch.optim.SGD, dampening 0, no Nesterov):
//   g' = g + weight_decay·w;  v = momentum·v + g';  w -= learning_rate·v.
// With momentum 0 this is plain SGD, w -= learning_rate·g' (seed 000 eq. 2).
struct SgdOptions {
  double learning_rate = 0;  // > 0, e.g. 0.05
  double momentum = 0;       // μ in [0, 1)
  double weight_decay = 0;   // L2 factor >= 0
};

// InputError naming "--set learning_rate" / "--set momentum" /
// "--set weight_decay" when a value is out of range or not finite.
void validate_sgd_options(const SgdOptions& options);

// Momentum SGD over the layers [first, last] of a model. Keeps one velocity
// tensor per parameter, created (zero) at the first step that touches it.
// Sparse gradients update "lazily": only the touched table rows move, and only
// their velocity rows decay and accumulate; rows a batch does not touch keep
// both their weights and their velocity (weight decay too applies to touched
// rows only). Repeated rows are summed before the update, so a row listed
// twice gets one momentum step with the summed gradient.
class Sgd {
 public:
  explicit Sgd(SgdOptions options);

  // Applies one step of `grads` to `weights`, layers [first, last].
  void step(Weights& weights, const Gradients& grads, int64_t first, int64_t last);

  const SgdOptions& options() const { return options_; }
  // The velocity buffers, shaped like the weights (empty before a layer's
  // first step, or when momentum is 0).
  const Weights& velocity() const { return velocity_; }
  // Replaces the velocity buffers (a checkpoint's), shaped as velocity() gives them.
  void set_velocity(Weights velocity) { velocity_ = std::move(velocity); }

 private:
  void step_dense(Tensor& param, const Tensor& grad, Tensor* velocity) const;
  void step_sparse(Tensor& param, const ParamGrad& grad, Tensor* velocity) const;

  SgdOptions options_;
  Weights velocity_;
};

// A sparse gradient's rows as Sgd's lazy step takes them, for a table of
// `table_rows` rows of `width`: each row once with its values' sum (`0 +
// g` where listed once). Rows listed once each, ascending (a parameter
// server's sums), are the gradient's own; others are merged in order of
// first appearance through `merge`, whose buffers the spans then name.
// TRAINSIM_CHECK on a width other than the table's or a row outside it.
struct RowsToStep {
  std::span<const int64_t> rows;
  std::span<const float> values;  // rows.size() x width
};
RowsToStep rows_to_step(const ParamGrad& grad, int64_t table_rows, int64_t width, RowMerge& merge);

// into[l][p] += from[l][p] for the layers [first, last]. Dense + dense adds
// element-wise; sparse + sparse appends the rows (repeats add); sparse into
// dense scatters the rows; dense into sparse turns `into` dense.
void add_gradients(Gradients& into, const Gradients& from, int64_t first, int64_t last);

// Multiplies every value of layers [first, last] by `factor` (e.g. 1/N to
// average N workers' sums).
void scale_gradients(Gradients& grads, float factor, int64_t first, int64_t last);

// Zeroes dense gradients and empties sparse ones (no rows), layers [first, last].
void clear_gradients(Gradients& grads, int64_t first, int64_t last);

// dense[row · width ...] += each listed row of a sparse gradient; `dense` is
// a table of width-wide rows.
void scatter_add_rows(const ParamGrad& grad, std::span<float> dense, int64_t width);

// The dense tensor of shape `param_shape` ({table rows, width}) equal to a
// sparse gradient (repeated rows add); a dense gradient is returned as is.
Tensor densify_gradient(const ParamGrad& grad, const std::vector<int64_t>& param_shape);

// Number of floats flatten_gradients writes for layers [first, last].
int64_t flat_gradient_size(const Gradients& grads, int64_t first, int64_t last);

// The dense gradients of layers [first, last] in one buffer, in this order:
// layer first..last, within a layer its parameters in order (weights, then
// bias), each tensor's data row-major. Sparse gradients are skipped (they are
// exchanged as rows, not reduced as a flat buffer); densify them first to
// include them.
std::vector<float> flatten_gradients(const Gradients& grads, int64_t first, int64_t last);

// The inverse: overwrites the dense gradients of layers [first, last] with
// `flat` read in the order above; `flat` must hold exactly
// flat_gradient_size values.
void unflatten_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last);

// Adds `flat` (the same layout) into the dense gradients of layers [first,
// last]: a pushed gradient summed in place, without unflattening a copy.
void add_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last);

}  // namespace trainsim
