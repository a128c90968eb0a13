// ModelBuilder: shape inference and parameter/FLOP counting per layer kind.
#include "model/zoo/builder.hpp"

#include "model/error.hpp"

namespace trainsim {
namespace {

int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // As in Caffe and PyTorch: the last window must start inside the input (or left padding).
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

ConvSpec conv(int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad, bool bias) {
  return ConvSpec{out_channels, kernel, kernel, stride, stride, pad, pad, 1, bias};
}

PoolSpec pool(int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  return PoolSpec{kernel, kernel, stride, stride, pad, pad, ceil_mode};
}

ModelBuilder::ModelBuilder(std::string name, std::string description, std::vector<int64_t> input_shape,
                           int64_t default_batch) {
  model_.name = std::move(name);
  model_.description = std::move(description);
  model_.input_shape = std::move(input_shape);
  model_.default_batch = default_batch;
  shapes_[kModelInput] = model_.input_shape;
}

const std::vector<int64_t>& ModelBuilder::shape_of(const std::string& name) const {
  auto it = shapes_.find(name);
  TRAINSIM_CHECK(it != shapes_.end(), model_.name + ": no layer named '" + name + "'");
  return it->second;
}

std::string ModelBuilder::append(Layer layer) {
  TRAINSIM_CHECK(!shapes_.count(layer.name), model_.name + ": layer name used twice: " + layer.name);
  for (const std::string& input : layer.inputs) shape_of(input);
  shapes_[layer.name] = layer.output_shape;
  model_.layers.push_back(std::move(layer));
  return model_.layers.back().name;
}

std::string ModelBuilder::custom(Layer layer) { return append(std::move(layer)); }

std::string ModelBuilder::conv2d(const std::string& name, const std::string& from, const ConvSpec& s) {
  const auto& in = shape_of(from);
  TRAINSIM_CHECK(in.size() == 3, name + ": conv2d needs a {C,H,W} input");
  TRAINSIM_CHECK(in[0] % s.groups == 0 && s.out_channels % s.groups == 0, name + ": groups must divide channels");
  const int64_t ho = (in[1] + 2 * s.pad_h - s.kernel_h) / s.stride_h + 1;
  const int64_t wo = (in[2] + 2 * s.pad_w - s.kernel_w) / s.stride_w + 1;
  TRAINSIM_CHECK(ho >= 1 && wo >= 1, name + ": kernel larger than its input");
  const int64_t fan_in = in[0] / s.groups * s.kernel_h * s.kernel_w;
  const int64_t outputs = s.out_channels * ho * wo;
  Layer layer{name, "conv2d", {from}, {s.out_channels, ho, wo}};
  layer.param_count = fan_in * s.out_channels + (s.bias ? s.out_channels : 0);
  layer.forward_flops = 2.0 * fan_in * outputs + (s.bias ? outputs : 0);
  layer.window = WindowSpec{s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups, false};
  layer.bias = s.bias;
  return append(std::move(layer));
}

std::string ModelBuilder::elementwise(const std::string& name, const std::string& op, const std::string& from,
                                      double flops_per_element) {
  Layer layer{name, op, {from}, shape_of(from)};
  layer.forward_flops = flops_per_element * element_count(layer.output_shape);
  return append(std::move(layer));
}

std::string ModelBuilder::batchnorm(const std::string& name, const std::string& from) {
  const auto& in = shape_of(from);
  Layer layer{name, "batchnorm", {from}, in};
  layer.param_count = 2 * in[0];
  layer.forward_flops = 4.0 * element_count(in);
  return append(std::move(layer));
}

std::string ModelBuilder::relu(const std::string& name, const std::string& from) {
  return elementwise(name, "relu", from, 1.0);
}

std::string ModelBuilder::activation(const std::string& name, const std::string& op, const std::string& from) {
  return elementwise(name, op, from, 1.0);
}

std::string ModelBuilder::dropout(const std::string& name, const std::string& from) {
  return elementwise(name, "dropout", from, 1.0);
}

std::string ModelBuilder::layernorm(const std::string& name, const std::string& from) {
  const auto& in = shape_of(from);
  Layer layer{name, "layernorm", {from}, in};
  layer.param_count = 2 * in.back();
  layer.forward_flops = 5.0 * element_count(in);
  return append(std::move(layer));
}

std::string ModelBuilder::positional_encoding(const std::string& name, const std::string& from) {
  TRAINSIM_CHECK(shape_of(from).size() == 2, name + ": position encoding needs a {T, d} input");
  return elementwise(name, "positional_encoding", from, 1.0);
}

std::string ModelBuilder::softmax(const std::string& name, const std::string& from) {
  return elementwise(name, "softmax", from, 5.0);
}

std::string ModelBuilder::maxpool(const std::string& name, const std::string& from, const PoolSpec& s) {
  const auto& in = shape_of(from);
  TRAINSIM_CHECK(in.size() == 3, name + ": pooling needs a {C,H,W} input");
  const int64_t ho = pooled_size(in[1], s.kernel_h, s.stride_h, s.pad_h, s.ceil_mode);
  const int64_t wo = pooled_size(in[2], s.kernel_w, s.stride_w, s.pad_w, s.ceil_mode);
  Layer layer{name, "maxpool", {from}, {in[0], ho, wo}};
  layer.forward_flops = static_cast<double>(s.kernel_h * s.kernel_w) * in[0] * ho * wo;
  layer.window = WindowSpec{s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w, 1, s.ceil_mode};
  return append(std::move(layer));
}

std::string ModelBuilder::avgpool(const std::string& name, const std::string& from, const PoolSpec& s) {
  std::string out = maxpool(name, from, s);
  model_.layers.back().op = "avgpool";
  return out;
}

std::string ModelBuilder::global_avgpool(const std::string& name, const std::string& from) {
  const auto& in = shape_of(from);
  TRAINSIM_CHECK(in.size() == 3, name + ": global pooling needs a {C,H,W} input");
  Layer layer{name, "avgpool", {from}, {in[0]}};
  layer.forward_flops = static_cast<double>(element_count(in));
  return append(std::move(layer));
}

std::string ModelBuilder::flatten(const std::string& name, const std::string& from) {
  return append(Layer{name, "flatten", {from}, {element_count(shape_of(from))}});
}

std::string ModelBuilder::linear(const std::string& name, const std::string& from, int64_t out_features, bool bias) {
  std::vector<int64_t> shape = shape_of(from);
  const int64_t in_features = shape.back();
  const int64_t positions = element_count(shape) / in_features;
  shape.back() = out_features;
  Layer layer{name, "linear", {from}, shape};
  layer.param_count = in_features * out_features + (bias ? out_features : 0);
  layer.forward_flops = positions * (2.0 * in_features * out_features + (bias ? out_features : 0));
  layer.bias = bias;
  return append(std::move(layer));
}

std::string ModelBuilder::add(const std::string& name, const std::vector<std::string>& from) {
  TRAINSIM_CHECK(from.size() >= 2, name + ": add needs two inputs");
  const auto& shape = shape_of(from.front());
  for (const auto& f : from) TRAINSIM_CHECK(shape_of(f) == shape, name + ": add of different shapes");
  Layer layer{name, "add", from, shape};
  layer.forward_flops = static_cast<double>(from.size() - 1) * element_count(shape);
  return append(std::move(layer));
}

std::string ModelBuilder::concat(const std::string& name, const std::vector<std::string>& from, int axis) {
  TRAINSIM_CHECK(!from.empty(), name + ": concat needs inputs");
  std::vector<int64_t> shape = shape_of(from.front());
  TRAINSIM_CHECK(axis >= 0 && static_cast<size_t>(axis) < shape.size(), name + ": bad concat axis");
  shape[axis] = 0;
  for (const auto& f : from) {
    const auto& s = shape_of(f);
    TRAINSIM_CHECK(s.size() == shape.size(), name + ": concat of different ranks");
    for (size_t d = 0; d < s.size(); ++d) {
      TRAINSIM_CHECK(static_cast<int>(d) == axis || s[d] == shape[d], name + ": concat of mismatched shapes");
    }
    shape[axis] += s[axis];
  }
  return append(Layer{name, "concat", from, shape});
}

std::string ModelBuilder::embedding(const std::string& name, const std::string& from, int64_t vocabulary,
                                    int64_t dim, bool sparse) {
  const auto& in = shape_of(from);
  const int64_t tokens = element_count(in);
  Layer layer{name, "embedding", {from}, {tokens, dim}};
  layer.param_count = vocabulary * dim;
  layer.sparse = sparse;
  layer.sparse_rows = vocabulary;
  layer.sparse_rows_per_sample = static_cast<double>(tokens);
  return append(std::move(layer));
}

std::string ModelBuilder::embedding_bag(const std::string& name, const std::string& from, int64_t vocabulary,
                                        int64_t dim) {
  std::string out = embedding(name, from, vocabulary, dim, true);
  Layer& layer = model_.layers.back();
  layer.op = "embedding_bag";
  layer.output_shape = {dim};
  // The sum of the looked-up rows: one add per row element.
  layer.forward_flops = layer.sparse_rows_per_sample * static_cast<double>(dim);
  shapes_[out] = layer.output_shape;
  return out;
}

std::string ModelBuilder::lstm(const std::string& name, const std::string& from, const LstmSpec& s) {
  const auto& in = shape_of(from);
  TRAINSIM_CHECK(in.size() == 2, name + ": lstm needs a {T, features} input");
  const int64_t steps = in[0];
  const int64_t recurrent = s.projection > 0 ? s.projection : s.hidden;
  const int64_t directions = s.bidirectional ? 2 : 1;
  const int64_t per_direction = 4 * s.hidden * (in[1] + recurrent) + s.bias_vectors * 4 * s.hidden +
                                (s.projection > 0 ? s.hidden * s.projection : 0);
  Layer layer{name, "lstm", {from}, {steps, recurrent * directions}};
  layer.param_count = directions * per_direction;
  const double step_flops = 2.0 * 4 * s.hidden * (in[1] + recurrent) + 12.0 * s.hidden +
                            (s.projection > 0 ? 2.0 * s.hidden * s.projection : 0.0);
  layer.forward_flops = directions * steps * step_flops;
  return append(std::move(layer));
}

std::string ModelBuilder::attention(const std::string& name, const std::string& query_from,
                                    const std::string& kv_from, int64_t heads, bool causal) {
  const auto& q = shape_of(query_from);
  const auto& kv = shape_of(kv_from);
  TRAINSIM_CHECK(q.size() == 2 && kv.size() == 2 && q[1] == kv[1], name + ": attention needs {T, d} inputs");
  const double t = static_cast<double>(q[0]), tk = static_cast<double>(kv[0]), d = static_cast<double>(q[1]);
  std::vector<std::string> inputs{query_from};
  if (kv_from != query_from) inputs.push_back(kv_from);
  Layer layer{name, "attention", inputs, q};
  layer.param_count = 4 * q[1] * q[1] + 4 * q[1];
  layer.heads = heads;
  layer.causal = causal;
  layer.forward_flops = 2 * t * d * d + 2 * 2 * tk * d * d + 2 * t * d * d + 4 * t * tk * d + 5 * t * tk * heads;
  return append(std::move(layer));
}

Model ModelBuilder::build() && { return std::move(model_); }

}  // namespace trainsim
