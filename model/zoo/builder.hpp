// ModelBuilder: writes a zoo model layer by layer, tracking shapes so each
// layer's output shape, parameter count and forward FLOPs follow from its
// arguments. Conventions (per sample; a multiply-add counts 2 FLOPs):
//   conv2d   2·(Cin/groups)·kh·kw·Cout·Ho·Wo (+Cout·Ho·Wo with bias)
//   linear   2·in·out per leading position (+out with bias); acts on the last dim
//   batchnorm 4 per element, 2·C parameters (scale, shift; running stats are buffers)
//   relu, dropout, activation: 1 per element; pool: kh·kw per output element
//   add: (inputs-1) per element; concat, flatten, embedding: 0
//   lstm: per step and direction 2·4h·(in + r) + 12h, r = projection or h, plus 2·h·p if projected
//   attention: 2·T·d·d for Q, 2·Tk·d·d each for K, V, 2·T·d·d for the output,
//              4·T·Tk·d for scores and weighted sum, 5·T·Tk·heads for softmax
//   layernorm 5 per element, 2·d parameters; softmax 5 per element
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "model/layer.hpp"

namespace trainsim {

struct ConvSpec {
  int64_t out_channels = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t groups = 1;
  bool bias = true;
};

// Square kernel helper: conv(out, k, stride, pad, bias).
ConvSpec conv(int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t pad = 0, bool bias = true);

struct PoolSpec {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
  bool ceil_mode = false;  // Caffe/torch ceil_mode rounding of the output size
};

PoolSpec pool(int64_t kernel, int64_t stride, int64_t pad = 0, bool ceil_mode = false);

struct LstmSpec {
  int64_t hidden = 0;         // cells per direction
  int64_t projection = 0;     // 0 = no projection; else recurrent/output width (LSTMP)
  bool bidirectional = false;
  int64_t bias_vectors = 1;   // 1 (TensorFlow: one 4h bias) or 2 (cuDNN/PyTorch: b_ih and b_hh)
};

class ModelBuilder {
 public:
  ModelBuilder(std::string name, std::string description, std::vector<int64_t> input_shape,
               int64_t default_batch);

  // Each call appends one layer fed by `from` (a layer name or kModelInput)
  // and returns the new layer's name, so calls chain.
  std::string conv2d(const std::string& name, const std::string& from, const ConvSpec& spec);
  std::string batchnorm(const std::string& name, const std::string& from);
  std::string relu(const std::string& name, const std::string& from);
  // Generic elementwise activation (tanh, sigmoid, gelu, ...): 1 FLOP per element.
  std::string activation(const std::string& name, const std::string& op, const std::string& from);
  std::string maxpool(const std::string& name, const std::string& from, const PoolSpec& spec);
  std::string avgpool(const std::string& name, const std::string& from, const PoolSpec& spec);
  std::string global_avgpool(const std::string& name, const std::string& from);  // {C,H,W} -> {C}
  std::string flatten(const std::string& name, const std::string& from);
  std::string dropout(const std::string& name, const std::string& from);
  std::string linear(const std::string& name, const std::string& from, int64_t out_features, bool bias = true);
  std::string add(const std::string& name, const std::vector<std::string>& from);
  // Concatenates along the first per-sample dimension (channels for images,
  // features for {T, d} sequences use axis 1).
  std::string concat(const std::string& name, const std::vector<std::string>& from, int axis = 0);
  // Token ids {T} -> {T, dim}; sparse = gradient rows touched only (Parallax).
  std::string embedding(const std::string& name, const std::string& from, int64_t vocabulary, int64_t dim,
                        bool sparse);
  // Sum of the looked-up rows of a sparse table: {T} token ids -> {dim}.
  std::string embedding_bag(const std::string& name, const std::string& from, int64_t vocabulary, int64_t dim);
  // {T, in} -> {T, out}, out = (projection or hidden) × directions.
  std::string lstm(const std::string& name, const std::string& from, const LstmSpec& spec);
  // Multi-head attention: queries from `query_from` {T, d}, keys/values from `kv_from` {Tk, d}.
  std::string attention(const std::string& name, const std::string& query_from, const std::string& kv_from,
                        int64_t heads, bool causal = false);
  std::string layernorm(const std::string& name, const std::string& from);
  // Adds the sinusoidal position encoding to {T, d}: no parameters, 1 FLOP per element.
  std::string positional_encoding(const std::string& name, const std::string& from);
  std::string softmax(const std::string& name, const std::string& from);
  // Any layer not covered above; the caller supplies every field.
  std::string custom(Layer layer);

  const std::vector<int64_t>& shape_of(const std::string& name) const;
  const Model& model() const { return model_; }
  Model build() &&;

 private:
  std::string append(Layer layer);
  std::string elementwise(const std::string& name, const std::string& op, const std::string& from,
                          double flops_per_element);

  Model model_;
  std::unordered_map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace trainsim
