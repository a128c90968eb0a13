// A Network from a model description: one kernel per layer of the model's
// graph, the boundaries (cuts) pipeline stages exchange, and per-layer seeded
// weights. The forward and backward over a range of layers: network_range.cpp.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "exec/tensor/blas_threads.hpp"
#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

const std::set<std::string>& supported_ops() {
  static const std::set<std::string> ops{
      "linear",    "conv2d", "relu",   "gelu",      "maxpool",   "avgpool",             "flatten", "batchnorm",
      "layernorm", "add",    "concat", "attention", "embedding", "positional_encoding", "embedding_bag",
      "lstm",      "dropout", "softmax"};
  return ops;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "{";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "}";
}

std::string layer_where(const Model& model, size_t i) {
  return model.name + ": layers[" + std::to_string(i) + "] '" + model.layers[i].name + "'";
}

// Each layer's inputs as tensor indices (-1 the model input), checked: earlier
// tensors only, one input unless the op joins several, and every layer but
// the last read by a later one (the network has one output, the loss's).
std::vector<std::vector<int32_t>> read_graph(const Model& model) {
  if (model.layers.empty()) throw InputError(model.name, "has no layers", "at least one layer");
  std::vector<std::vector<int32_t>> inputs(model.layers.size());
  std::vector<bool> read(model.layers.size(), false);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    const bool joins = layer.op == "add" || layer.op == "concat";
    if (layer.inputs.empty() || (!joins && layer.inputs.size() != 1)) {
      throw InputError(layer_where(model, i), "reads " + std::to_string(layer.inputs.size()) + " inputs",
                       joins ? "at least one input" : "one input (only add and concat join several)");
    }
    for (const std::string& name : layer.inputs) {
      int32_t index = -1;
      if (name != kModelInput) {
        const auto found = find_layer(model, name);
        if (!found || *found >= i) {
          throw InputError(layer_where(model, i), "reads '" + name + "'", "the input or an earlier layer");
        }
        index = static_cast<int32_t>(*found);
        read[*found] = true;
      }
      inputs[i].push_back(index);
    }
  }
  for (size_t i = 0; i + 1 < model.layers.size(); ++i) {
    if (!read[i]) {
      throw InputError(layer_where(model, i), "is read by no later layer",
                       "one output, the last layer's: exec trains the loss of that one");
    }
  }
  return inputs;
}

void check_window(const Model& model, size_t i, bool pooling) {
  const WindowSpec& w = model.layers[i].window;
  const bool ok = w.kernel_h > 0 && w.kernel_w > 0 && w.stride_h > 0 && w.stride_w > 0 && w.pad_h >= 0 &&
                  w.pad_w >= 0 && w.groups >= 1 && (!pooling || (2 * w.pad_h <= w.kernel_h && 2 * w.pad_w <= w.kernel_w));
  if (!ok) {
    throw InputError(layer_where(model, i) + ".window", "kernel, stride, padding or groups out of range",
                     "kernel >= 1, stride >= 1, padding >= 0" +
                         std::string(pooling ? " and at most half the kernel" : ", groups >= 1"));
  }
}

// The kernel of layer i given its inputs' per-sample shapes.
std::unique_ptr<ExecLayer> make_kernel(const Model& model, size_t i, const std::vector<std::vector<int64_t>>& ins) {
  const Layer& layer = model.layers[i];
  const std::string& op = layer.op;
  const std::vector<int64_t>& in = ins.front();
  const auto bad_input = [&](const std::string& expected) {
    return InputError(layer_where(model, i), op + " reads a " + shape_text(in) + " input", expected);
  };
  if (op == "add") {
    for (const auto& other : ins) {
      if (other != in) throw bad_input("inputs of one shape; another is " + shape_text(other));
    }
    return make_add(static_cast<int64_t>(ins.size()));
  }
  if (op == "concat") {
    std::vector<int64_t> sizes;
    for (const auto& other : ins) {
      if (other.empty() || other.size() != in.size() || !std::equal(other.begin() + 1, other.end(), in.begin() + 1)) {
        throw bad_input("inputs that differ in their first dimension only; another is " + shape_text(other));
      }
      sizes.push_back(element_count(other));
    }
    return make_concat(std::move(sizes));
  }
  if (op == "gelu") return make_gelu();
  if (op == "layernorm") {
    if (in.empty()) throw bad_input("an input with a feature dimension");
    return make_layernorm(in.back());
  }
  if (op == "batchnorm") {
    if (in.size() != 1 && in.size() != 3) throw bad_input("a {C} or {C, H, W} input");
    return make_batchnorm(in);
  }
  if (op == "avgpool" && in.size() == 3 && layer.output_shape.size() == 1) return make_global_avgpool(in);
  if (op == "linear") {
    if (in.empty() || layer.output_shape.empty()) throw bad_input("an input with a feature dimension");
    return make_linear(in.back(), layer.output_shape.back(), layer.bias);
  }
  if (op == "relu") return make_relu();
  if (op == "dropout" || op == "softmax") return make_identity();
  if (op == "flatten") return make_reshape(in, {element_count(in)});
  if (op == "conv2d" || op == "maxpool" || op == "avgpool") {
    if (in.size() != 3) throw bad_input("a {C, H, W} input");
    check_window(model, i, op != "conv2d");
    if (op == "maxpool") return make_maxpool(in, layer.window);
    if (op == "avgpool") return make_avgpool(in, layer.window);
    if (layer.output_shape.size() != 3 || in[0] % layer.window.groups != 0 ||
        layer.output_shape[0] % layer.window.groups != 0) {
      throw bad_input("channel counts that the " + std::to_string(layer.window.groups) + " groups divide");
    }
    return make_conv2d(in, layer.output_shape[0], layer.window, layer.bias);
  }
  if (op == "attention") {
    if (in.size() != 2 || layer.heads < 1 || in[1] % layer.heads != 0) {
      throw bad_input("a {T, d} input whose d the layer's heads (" + std::to_string(layer.heads) + ") divide");
    }
    return make_attention(in[0], in[1], layer.heads, layer.causal);
  }
  if (op == "lstm") {
    if (in.size() != 2 || layer.output_shape.size() != 2) throw bad_input("a {T, features} input");
    const int64_t hidden = layer.output_shape[1];
    if (layer.param_count != 4 * hidden * (in[1] + hidden) + 4 * hidden) {
      throw InputError(layer_where(model, i), "is an LSTM of " + std::to_string(layer.param_count) + " parameters",
                       "a unidirectional LSTM without projection and with one bias vector (" +
                           std::to_string(4 * hidden * (in[1] + hidden) + 4 * hidden) + " parameters): exec runs those");
    }
    return make_lstm(in[0], in[1], hidden);
  }
  if (op == "positional_encoding") {
    if (in.size() != 2) throw bad_input("a {T, d} input");
    return make_positional_encoding(in[0], in[1]);
  }
  if (op == "embedding" && layer.sparse) {
    throw InputError(layer_where(model, i), "is an embedding with sparse gradients ({T} -> {T, dim})",
                     "a dense embedding, or an embedding_bag for sparse rows: exec has kernels for those");
  }
  if (op == "embedding") {
    if (in.size() != 1) throw bad_input("a {T} input of token ids");
    if (layer.output_shape.size() != 2 || layer.sparse_rows <= 0) {
      throw InputError(layer_where(model, i), "has no table geometry", "output_shape {T, dim} and sparse_rows > 0");
    }
    return make_embedding(layer_where(model, i), layer.sparse_rows, layer.output_shape[1]);
  }
  if (op == "embedding_bag") {
    if (in.size() != 1) throw bad_input("a {T} input of token ids");
    if (layer.output_shape.size() != 1 || layer.sparse_rows <= 0) {
      throw InputError(layer_where(model, i), "has no table geometry", "output_shape {dim} and sparse_rows > 0");
    }
    return make_embedding_bag(layer_where(model, i), layer.sparse_rows, layer.output_shape[0]);
  }
  std::string list;
  for (const auto& name : supported_ops()) list += (list.empty() ? "" : ", ") + name;
  throw InputError(layer_where(model, i), "op '" + op + "' has no CPU kernel", "one of " + list);
}

// The shape a kernel produces, found by running it on an empty batch.
std::vector<int64_t> sample_output_shape(const ExecLayer& kernel, const std::vector<std::vector<int64_t>>& ins) {
  std::vector<Tensor> xs;
  std::vector<const Tensor*> pointers;
  for (const auto& in : ins) {
    std::vector<int64_t> batch_shape{0};
    batch_shape.insert(batch_shape.end(), in.begin(), in.end());
    xs.emplace_back(batch_shape);
  }
  for (const Tensor& x : xs) pointers.push_back(&x);
  LayerParams params;
  for (const auto& shape : kernel.param_shapes()) params.emplace_back(shape);
  LayerCache cache;
  const Tensor y = kernel.forward_inputs(params, pointers, cache);
  return std::vector<int64_t>(y.shape.begin() + 1, y.shape.end());
}

// splitmix64's finalizer: nearby (seed, layer) pairs give unrelated streams.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

// Tensor t (made by layer t, or the input) is live at boundary i when
// t < i <= its last reader; the last layer's output at the end.
void link_network(Network& network) {
  const auto n = static_cast<int32_t>(network.layers.size());
  TRAINSIM_CHECK(n > 0 && network.output_shapes.size() == network.layers.size(),
                 "a network needs layers and one output shape per layer");
  if (network.inputs.empty()) {
    for (int32_t i = 0; i < n; ++i) network.inputs.push_back({i - 1});
  }
  TRAINSIM_CHECK(network.inputs.size() == network.layers.size(), "a network needs one input list per layer");
  network.last_reader.assign(static_cast<size_t>(n) + 1, -1);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t t : network.inputs[i]) network.last_reader[t + 1] = std::max(network.last_reader[t + 1], i);
  }
  network.last_reader[n] = n;  // the output, read by the loss
  network.cuts.assign(static_cast<size_t>(n) + 1, {});
  network.cut_shapes.assign(static_cast<size_t>(n) + 1, {});
  for (int32_t i = 0; i <= n; ++i) {
    int64_t packed = 0;
    for (int32_t t = -1; t < i; ++t) {
      if (network.last_reader[t + 1] < i) continue;
      network.cuts[i].push_back(t);
      packed += element_count(t < 0 ? network.input_shape : network.output_shapes[t]);
    }
    TRAINSIM_CHECK(!network.cuts[i].empty(), "a network boundary carries nothing (a tensor read by no layer)");
    const int32_t only = network.cuts[i].front();
    network.cut_shapes[i] = network.cuts[i].size() == 1
                                ? (only < 0 ? network.input_shape : network.output_shapes[only])
                                : std::vector<int64_t>{packed};
  }
}

Network build_network(const Model& model) {
  use_one_blas_thread_per_caller();
  Network network;
  network.inputs = read_graph(model);
  network.model = model.name;
  network.input_shape = model.input_shape;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    std::vector<std::vector<int64_t>> ins;
    for (int32_t t : network.inputs[i]) ins.push_back(t < 0 ? model.input_shape : network.output_shapes[t]);
    auto kernel = make_kernel(model, i, ins);
    const std::vector<int64_t> out = sample_output_shape(*kernel, ins);
    if (out != model.layers[i].output_shape) {
      throw InputError(layer_where(model, i), "declares output " + shape_text(model.layers[i].output_shape) +
                                                  " but computes " + shape_text(out) + " from " +
                                                  shape_text(ins.front()),
                       "an output_shape consistent with its input and parameters");
    }
    int64_t kernel_params = 0;
    for (const auto& param_shape : kernel->param_shapes()) kernel_params += element_count(param_shape);
    if (kernel_params != model.layers[i].param_count) {
      throw InputError(layer_where(model, i),
                       "declares " + std::to_string(model.layers[i].param_count) + " parameters but its kernel holds " +
                           std::to_string(kernel_params),
                       "a param_count consistent with its shapes and bias");
    }
    network.layer_names.push_back(model.layers[i].name);
    network.layers.push_back(std::move(kernel));
    network.output_shapes.push_back(out);
  }
  network.classes = element_count(network.output_shapes.back());
  link_network(network);
  return network;
}

// Layer i draws from its own engine seeded by mix(seed + golden·(i+1)), so its
// weights depend on the seed and its index only.
Weights init_weights(const Network& network, uint64_t seed) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
  Weights weights(network.layers.size());
  for (size_t i = 0; i < network.layers.size(); ++i) {
    std::mt19937_64 rng(mix(seed + kGolden * (i + 1)));
    network.layers[i]->init_params(weights[i], rng);
  }
  return weights;
}

Statistics init_statistics(const Network& network) {
  Statistics statistics;
  statistics.reserve(network.layers.size());
  for (const auto& layer : network.layers) statistics.push_back(layer->init_statistics());
  return statistics;
}

void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                       Statistics& statistics) {
  TRAINSIM_CHECK(statistics.size() == network.layers.size(), "statistics are not one entry per layer");
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(network.layers.size()) &&
                     static_cast<int64_t>(caches.size()) == last - first + 1,
                 "caches are not one per layer of the range");
  for (int64_t i = first; i <= last; ++i) {
    const auto l = static_cast<size_t>(i);
    if (!statistics[l].empty()) network.layers[l]->update_statistics(statistics[l], caches[l - static_cast<size_t>(first)]);
  }
}

Gradients zero_gradients(const Network& network, const Weights& weights) {
  TRAINSIM_CHECK(weights.size() == network.layers.size(), "weights are not one entry per layer");
  Gradients grads(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const bool sparse = network.layers[i]->sparse();
    for (const Tensor& param : weights[i]) {
      ParamGrad grad;
      grad.sparse = sparse;
      if (sparse) {
        // The table's width by its shape: its values may be on a device.
        grad.row_values.shape = {0, param.shape.size() >= 2 ? param.shape.back() : param.row_size()};
      } else {
        grad.dense = Tensor(param.shape);
      }
      grads[i].push_back(std::move(grad));
    }
  }
  return grads;
}

}  // namespace trainsim
