// A Network from a model description: one kernel per layer of a chain model,
// per-layer seeded weights, and the forward/backward over a range of layers
// that pipeline stages run.
#include <set>
#include <string>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

const std::set<std::string>& supported_ops() {
  static const std::set<std::string> ops{"linear", "conv2d", "relu", "maxpool", "avgpool", "flatten",
                                         "embedding_bag", "dropout", "softmax"};
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

// Every layer reads exactly the one before it (the first reads the input).
void check_chain(const Model& model) {
  if (model.layers.empty()) throw InputError(model.name, "has no layers", "at least one layer");
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    const std::string expected = i == 0 ? std::string(kModelInput) : model.layers[i - 1].name;
    if (layer.inputs.size() != 1 || layer.inputs[0] != expected) {
      std::string reads;
      for (const auto& input : layer.inputs) reads += (reads.empty() ? "'" : ", '") + input + "'";
      throw InputError(layer_where(model, i), "reads " + (reads.empty() ? std::string("nothing") : reads),
                       "a chain model whose layers each read only the one before ('" + expected +
                           "'); exec runs chains only");
    }
  }
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

// The kernel of layer i given its per-sample input shape.
std::unique_ptr<ExecLayer> make_kernel(const Model& model, size_t i, const std::vector<int64_t>& in) {
  const Layer& layer = model.layers[i];
  const std::string& op = layer.op;
  const auto bad_input = [&](const std::string& expected) {
    return InputError(layer_where(model, i), op + " reads a " + shape_text(in) + " input", expected);
  };
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
std::vector<int64_t> sample_output_shape(const ExecLayer& kernel, const std::vector<int64_t>& in) {
  std::vector<int64_t> batch_shape{0};
  batch_shape.insert(batch_shape.end(), in.begin(), in.end());
  LayerParams params;
  for (const auto& shape : kernel.param_shapes()) params.emplace_back(shape);
  LayerCache cache;
  const Tensor y = kernel.forward(params, Tensor(batch_shape), cache);
  return std::vector<int64_t>(y.shape.begin() + 1, y.shape.end());
}

void check_range(const Network& network, const Weights& weights, int64_t first, int64_t last) {
  const auto count = static_cast<int64_t>(network.layers.size());
  TRAINSIM_CHECK(0 <= first && first <= last && last < count, "layer range [" + std::to_string(first) + ", " +
                                                                   std::to_string(last) + "] outside the network");
  TRAINSIM_CHECK(static_cast<int64_t>(weights.size()) == count, "weights are not one entry per layer");
}

// splitmix64's finalizer: nearby (seed, layer) pairs give unrelated streams.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

Network build_network(const Model& model) {
  check_chain(model);
  Network network;
  network.model = model.name;
  network.input_shape = model.input_shape;
  std::vector<int64_t> shape = model.input_shape;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    auto kernel = make_kernel(model, i, shape);
    const std::vector<int64_t> out = sample_output_shape(*kernel, shape);
    if (out != model.layers[i].output_shape) {
      throw InputError(layer_where(model, i), "declares output " + shape_text(model.layers[i].output_shape) +
                                                  " but computes " + shape_text(out) + " from " + shape_text(shape),
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
    shape = out;
  }
  network.classes = element_count(shape);
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

Gradients zero_gradients(const Network& network, const Weights& weights) {
  TRAINSIM_CHECK(weights.size() == network.layers.size(), "weights are not one entry per layer");
  Gradients grads(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const bool sparse = network.layers[i]->sparse();
    for (const Tensor& param : weights[i]) {
      ParamGrad grad;
      grad.sparse = sparse;
      if (sparse) {
        grad.row_values.shape = {0, param.row_size()};
      } else {
        grad.dense = Tensor(param.shape);
      }
      grads[i].push_back(std::move(grad));
    }
  }
  return grads;
}

Tensor forward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& x,
                     std::vector<LayerCache>& caches) {
  check_range(network, weights, first, last);
  caches.assign(static_cast<size_t>(last - first + 1), LayerCache{});
  Tensor activation = network.layers[first]->forward(weights[first], x, caches[0]);
  for (int64_t i = first + 1; i <= last; ++i) {
    activation = network.layers[i]->forward(weights[i], activation, caches[i - first]);
  }
  return activation;
}

Tensor backward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& dy,
                      const std::vector<LayerCache>& caches, Gradients& grads) {
  check_range(network, weights, first, last);
  TRAINSIM_CHECK(static_cast<int64_t>(caches.size()) == last - first + 1, "caches are not one per layer of the range");
  TRAINSIM_CHECK(grads.size() == weights.size(), "gradients are not one entry per layer");
  Tensor grad = network.layers[last]->backward(weights[last], dy, caches[last - first], grads[last]);
  for (int64_t i = last - 1; i >= first; --i) {
    grad = network.layers[i]->backward(weights[i], grad, caches[i - first], grads[i]);
  }
  return grad;
}

}  // namespace trainsim
