// Factories of the CPU layer kernels, private to exec/tensor: network.cpp
// builds a Network from them, the tests build single layers. Shapes here are
// per sample (no batch dimension), as in model::Layer.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec/tensor/layers.hpp"

namespace trainsim {

// Puts `tensors` into cache.saved, moving those given as rvalues (an
// initializer list, cache.saved = {std::move(a)}, would copy them).
template <typename... Tensors>
void keep(LayerCache& cache, Tensors&&... tensors) {
  cache.saved.clear();
  cache.saved.reserve(sizeof...(Tensors));
  (cache.saved.push_back(std::forward<Tensors>(tensors)), ...);
}

// A layer whose backward reads its input: its forward is apply(), and the
// input is kept in cache.saved[0], copied, or taken when the caller gives it.
class KeepsInput : public ExecLayer {
 public:
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const final {
    Tensor y = apply(params, x);
    keep(cache, x);
    return y;
  }
  Tensor forward_consuming(const LayerParams& params, Tensor&& x, LayerCache& cache) const final {
    Tensor y = apply(params, x);
    keep(cache, std::move(x));
    return y;
  }
  virtual Tensor apply(const LayerParams& params, const Tensor& x) const = 0;
};

// A float uniform in [-bound, bound) from the top 24 bits of one draw, so the
// same engine state gives the same value with every standard library.
float uniform_from_bits(std::mt19937_64& rng, float bound);

// y = x·Wᵀ + b on the last dimension; weight {out, in}, bias {out}.
std::unique_ptr<ExecLayer> make_linear(int64_t in_features, int64_t out_features, bool bias);

// max(x, 0), elementwise.
std::unique_ptr<ExecLayer> make_relu();

// The identity: dropout (evaluated as in inference) and softmax (the loss applies it).
std::unique_ptr<ExecLayer> make_identity();

// Reinterprets a per-sample `in_shape` as `out_shape` (same element count): flatten.
std::unique_ptr<ExecLayer> make_reshape(std::vector<int64_t> in_shape, std::vector<int64_t> out_shape);

// Output side of a convolution or pooling window over `in` input positions,
// as PyTorch and Caffe compute it (the last ceil-mode window starts inside).
int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode);

// A convolution's or pooling's window over {C, H, W} samples: the input's
// and output's sizes per sample.
struct Geometry {
  int64_t channels, height, width;  // input, per sample
  int64_t out_height, out_width;
  WindowSpec w;
  int64_t in_plane() const { return height * width; }
  int64_t out_plane() const { return out_height * out_width; }
};
Geometry make_geometry(const std::vector<int64_t>& in_shape, const WindowSpec& window, bool ceil_mode);

// Which kernels a layer with a library implementation runs: `fastest`,
// oneDNN's where it is built in and loads, else the project's own;
// `reference`, the project's own always (im2col and matrix products for
// conv2d). oneDNN's LSTM primitive was tried too and was 6-7% slower here
// than the Eigen recurrence (docs/results.md).
enum class Kernels { fastest, reference };

// Convolution over {C, H, W}; weight {out, C/groups, kh, kw}, bias {out}.
std::unique_ptr<ExecLayer> make_conv2d(std::vector<int64_t> in_shape, int64_t out_channels, const WindowSpec& window,
                                       bool bias, Kernels kernels = Kernels::fastest);

// Max pooling over {C, H, W}; padding never wins; the argmax goes in the cache.
std::unique_ptr<ExecLayer> make_maxpool(std::vector<int64_t> in_shape, const WindowSpec& window);

// Average pooling over {C, H, W}, dividing by the window clipped to the padded
// input (PyTorch's count_include_pad with ceil_mode; with no padding that is
// the count of input elements the window covers, as TensorFlow's SAME pooling).
std::unique_ptr<ExecLayer> make_avgpool(std::vector<int64_t> in_shape, const WindowSpec& window);

// Batch normalization in training mode over {C, H, W} or {C}: each channel
// normalized by the mean and biased variance of the batch (over the batch and,
// for images, every position), eps 1e-5, then scaled and shifted; scale {C}
// (init 1), shift {C} (init 0). Running mean and variance (momentum 0.1, the
// variance unbiased) are its statistics, which evaluation normalizes by.
std::unique_ptr<ExecLayer> make_batchnorm(std::vector<int64_t> in_shape);

// Layer normalization over the last dimension (size `features`), eps 1e-5,
// biased variance; scale {features} (init 1), shift {features} (init 0), as
// torch.nn.LayerNorm.
std::unique_ptr<ExecLayer> make_layernorm(int64_t features);

// GELU with the exact erf form, x·Φ(x), as torch.nn.GELU's default.
std::unique_ptr<ExecLayer> make_gelu();

// Global average pooling {C, H, W} -> {C}.
std::unique_ptr<ExecLayer> make_global_avgpool(std::vector<int64_t> in_shape);

// The elementwise sum of `inputs` tensors of one shape (a residual join).
std::unique_ptr<ExecLayer> make_add(int64_t inputs);

// The inputs side by side on their first per-sample dimension (channels of
// {C, H, W}, features of {d}); `sample_sizes` are their per-sample element counts.
std::unique_ptr<ExecLayer> make_concat(std::vector<int64_t> sample_sizes);

// Multi-head self-attention over {T, d} (Vaswani et al. 2017 §3.2): Q, K, V
// = x·W_qᵀ + b_q, ...; per head h of d/heads features softmax(Q_h·K_hᵀ /
// sqrt(d/heads)), with a causal mask when `causal` (position t sees 0..t),
// times V_h; the heads side by side, then the output projection W_o, b_o.
// Parameters: W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o ({d, d} and {d}),
// initialised as torch.nn.Linear's.
std::unique_ptr<ExecLayer> make_attention(int64_t tokens, int64_t dim, int64_t heads, bool causal);

// Token embedding: ids {T} (floats holding integers in [0, vocabulary)) ->
// {T, dim}, the table's rows; table {vocabulary, dim} initialised N(0, 1) as
// torch.nn.Embedding; a dense gradient. `name` appears in errors about ids.
std::unique_ptr<ExecLayer> make_embedding(std::string name, int64_t vocabulary, int64_t dim);

// Adds the sinusoidal position encoding of Vaswani et al. 2017 §3.5 to {T, d}:
// PE(t, 2i) = sin(t / 10000^(2i/d)), PE(t, 2i + 1) = cos(...). No parameters.
std::unique_ptr<ExecLayer> make_positional_encoding(int64_t tokens, int64_t dim);

// A unidirectional LSTM over {T, in} -> {T, hidden} (Hochreiter &
// Schmidhuber 1997 with the forget gate of Gers et al. 2000, as
// torch.nn.LSTM with one bias vector): per step, gates = [x_t, h_{t-1}]·Wᵀ + b
// split into i, f, g, o (hidden each); c_t = σ(f)⊙c_{t-1} + σ(i)⊙tanh(g),
// h_t = σ(o)⊙tanh(c_t), h_0 = c_0 = 0; the output is every h_t. Parameters:
// W {4·hidden, in + hidden}, b {4·hidden}, uniform ±1/sqrt(hidden) as torch.
std::unique_ptr<ExecLayer> make_lstm(int64_t tokens, int64_t in_features, int64_t hidden);

// Sum of looked-up table rows: ids {T} (floats, negative = padding) -> {dim};
// table {vocabulary, dim}, sparse gradient. `name` appears in errors about ids.
std::unique_ptr<ExecLayer> make_embedding_bag(std::string name, int64_t vocabulary, int64_t dim);

}  // namespace trainsim
