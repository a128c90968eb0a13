// Whole-model queries and validation of the layer graph.
#include "model/layer.hpp"

#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include "model/error.hpp"
#include "model/strings.hpp"

namespace trainsim {
namespace {

// Ops whose output has the shape of their one input and that hold no
// parameters, apart from the normalizations (which hold a scale and a shift).
const std::set<std::string> kShapeKeepingOps = {
    "relu", "selu", "tanh", "sigmoid", "gelu", "dropout", "softmax", "lrn", "batchnorm", "layernorm",
    "positional_encoding"};
const std::set<std::string> kOtherOps = {"add",    "attention", "attention_lstm",  "avgpool", "concat",
                                         "conv2d", "embedding", "embedding_bag",   "flatten", "linear",
                                         "lstm",   "maxpool",   "sampled_softmax", "slice"};
const std::set<std::string> kParameterFreeOps = {
    "relu", "selu",    "tanh",   "sigmoid", "gelu",    "dropout", "softmax", "lrn", "positional_encoding",
    "add",  "avgpool", "concat", "flatten", "maxpool", "slice"};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "{";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "}";
}

// All dimensions but the last.
std::vector<int64_t> leading(const std::vector<int64_t>& shape) {
  return shape.empty() ? shape : std::vector<int64_t>(shape.begin(), shape.end() - 1);
}

// What is wrong with `layer`'s input count or output shape given its inputs'
// shapes, or "" if they fit its op (the rules ModelBuilder follows).
std::string shape_problem(const Layer& layer, const std::vector<std::vector<int64_t>>& in) {
  const std::string& op = layer.op;
  const std::vector<int64_t>& out = layer.output_shape;
  const size_t n = in.size();
  const auto rank_is = [](const std::vector<int64_t>& shape, size_t rank) { return shape.size() == rank; };
  if (op == "add") {
    if (n < 2) return "add reads " + std::to_string(n) + " input";
    for (const auto& shape : in) {
      if (shape != out) return "add of " + shape_text(shape) + " into " + shape_text(out);
    }
    return "";
  }
  if (op == "concat") {
    int64_t elements = 0;
    for (const auto& shape : in) {
      if (shape.size() != out.size()) {
        return "concat of rank " + std::to_string(shape.size()) + " into " + shape_text(out);
      }
      elements += element_count(shape);
    }
    if (elements == element_count(out)) return "";
    return "concat of " + std::to_string(elements) + " elements into " + shape_text(out);
  }
  if (op == "attention" || op == "attention_lstm") {  // queries, and keys/values or memory
    if (n < (op == "attention" ? 1u : 2u) || n > 2) return op + " reads " + std::to_string(n) + " inputs";
    if (!rank_is(in[0], 2) || !rank_is(out, 2) || out[0] != in[0][0]) {
      return op + " of " + shape_text(in[0]) + " into " + shape_text(out) + "; both are {T, features}";
    }
    return op == "attention" && out != in[0] ? "attention of " + shape_text(in[0]) + " into " + shape_text(out) : "";
  }
  if (n != 1) return op + " reads " + std::to_string(n) + " inputs, not 1";
  const std::vector<int64_t>& x = in[0];
  const std::string of = op + " of " + shape_text(x) + " into " + shape_text(out);
  if (kShapeKeepingOps.count(op)) return out == x ? "" : of;
  if (op == "flatten") return rank_is(out, 1) && out[0] == element_count(x) ? "" : of;
  if (op == "slice") return element_count(out) <= element_count(x) ? "" : of;
  if (op == "linear" || op == "sampled_softmax") return leading(out) == leading(x) && !x.empty() ? "" : of;
  if (op == "conv2d") return rank_is(x, 3) && rank_is(out, 3) ? "" : of + "; both are {C, H, W}";
  if (op == "maxpool") return rank_is(x, 3) && rank_is(out, 3) && out[0] == x[0] ? "" : of;
  if (op == "avgpool") return rank_is(x, 3) && (rank_is(out, 3) || rank_is(out, 1)) && out[0] == x[0] ? "" : of;
  if (op == "embedding") return rank_is(out, 2) && out[0] == element_count(x) ? "" : of;
  if (op == "embedding_bag") return rank_is(x, 1) && rank_is(out, 1) ? "" : of;
  if (op == "lstm") return rank_is(x, 2) && rank_is(out, 2) && out[0] == x[0] ? "" : of;
  return "";
}

// What is wrong with `layer`'s param_count for its op, or "".
std::string param_problem(const Layer& layer, const std::vector<int64_t>& first_input) {
  if (kParameterFreeOps.count(layer.op) && layer.param_count != 0) return layer.op + " holds no parameters";
  if (layer.op == "linear" && !first_input.empty() && !layer.output_shape.empty()) {
    const int64_t weights = first_input.back() * layer.output_shape.back();
    if (layer.param_count != weights && layer.param_count != weights + layer.output_shape.back()) {
      return "linear " + std::to_string(first_input.back()) + " -> " + std::to_string(layer.output_shape.back()) +
             " holds " + std::to_string(weights) + " weights, plus " + std::to_string(layer.output_shape.back()) +
             " with a bias";
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& known_ops() {
  static const std::vector<std::string> ops = [] {
    std::set<std::string> all = kShapeKeepingOps;
    all.insert(kOtherOps.begin(), kOtherOps.end());
    return std::vector<std::string>(all.begin(), all.end());
  }();
  return ops;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t param_count(const Model& model) {
  int64_t total = 0;
  for (const Layer& layer : model.layers) total += layer.param_count;
  return total;
}

double forward_flops(const Model& model) {
  double total = 0;
  for (const Layer& layer : model.layers) total += layer.forward_flops;
  return total;
}

std::optional<size_t> find_layer(const Model& model, const std::string& name) {
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].name == name) return i;
  }
  return std::nullopt;
}

int64_t output_elements(const Model& model, const std::string& name) {
  if (name == kModelInput) return element_count(model.input_shape);
  auto index = find_layer(model, name);
  TRAINSIM_CHECK(index.has_value(), "no layer named " + name);
  return element_count(model.layers[*index].output_shape);
}

void validate_model(const Model& model, const std::string& where) {
  if (model.name.empty()) throw InputError(where + ": name", "is empty", "a model name");
  if (model.layers.empty()) throw InputError(where + ": layers", "is empty", "at least one layer");
  if (model.default_batch < 1) {
    throw InputError(where + ": default_batch", std::to_string(model.default_batch), "a batch >= 1");
  }
  for (int64_t d : model.input_shape) {
    if (d < 1) throw InputError(where + ": input_shape", "has a dimension " + std::to_string(d), "dimensions >= 1");
  }
  std::unordered_map<std::string, const std::vector<int64_t>*> shapes{{kModelInput, &model.input_shape}};
  const std::set<std::string> ops(known_ops().begin(), known_ops().end());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    const std::string at = where + ": layers[" + std::to_string(i) + "]";
    if (layer.name.empty()) throw InputError(at + ".name", "is empty", "a unique layer name");
    if (shapes.count(layer.name)) {
      throw InputError(at + ".name", "'" + layer.name + "' is used twice", "unique layer names");
    }
    if (!ops.count(layer.op)) {
      throw InputError(at + ".op", "is '" + layer.op + "'", "one of " + join(known_ops(), ", "));
    }
    if (layer.inputs.empty()) throw InputError(at + ".inputs", "is empty", "the earlier layers or 'input' it reads");
    std::vector<std::vector<int64_t>> input_shapes;
    for (const std::string& input : layer.inputs) {
      const auto found = shapes.find(input);
      if (found == shapes.end()) {
        throw InputError(at + ".inputs", "'" + input + "' names no earlier layer",
                         "names of earlier layers or 'input', in topological order");
      }
      input_shapes.push_back(*found->second);
    }
    if (layer.param_count < 0) {
      throw InputError(at + ".param_count", std::to_string(layer.param_count), "a count >= 0");
    }
    if (!std::isfinite(layer.forward_flops) || layer.forward_flops < 0) {
      throw InputError(at + ".forward_flops", std::to_string(layer.forward_flops), "a finite count >= 0");
    }
    for (int64_t d : layer.output_shape) {
      if (d < 1) throw InputError(at + ".output_shape", "has a dimension " + std::to_string(d), "dimensions >= 1");
    }
    if (const std::string problem = shape_problem(layer, input_shapes); !problem.empty()) {
      throw InputError(at + ".output_shape", "does not fit: " + problem,
                       "the shape '" + layer.op + "' gives from its inputs' shapes");
    }
    if (const std::string problem = param_problem(layer, input_shapes.front()); !problem.empty()) {
      throw InputError(at + ".param_count", "is " + std::to_string(layer.param_count) + "; " + problem,
                       "the parameters of a '" + layer.op + "' of these shapes");
    }
    if (layer.sparse && (layer.sparse_rows < 1 || !(layer.sparse_rows_per_sample >= 0))) {
      throw InputError(at + ".sparse_rows", "is missing or < 1 on a sparse layer",
                       "the table's row count and rows looked up per sample");
    }
    shapes.emplace(layer.name, &layer.output_shape);
  }
}

double sparse_fraction(const Layer& layer, int64_t batch) {
  if (!layer.sparse || layer.sparse_rows < 1) return 1.0;
  const double lookups = layer.sparse_rows_per_sample * static_cast<double>(batch);
  const double rows = static_cast<double>(layer.sparse_rows);
  // 1 - (1 - 1/V)^n, written with log1p/expm1 so a large V keeps its precision.
  return -std::expm1(lookups * std::log1p(-1.0 / rows));
}

}  // namespace trainsim
