// Whole-model queries and validation of the layer graph.
#include "model/layer.hpp"

#include <cmath>
#include <numeric>
#include <unordered_set>

#include "model/error.hpp"

namespace trainsim {

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
  std::unordered_set<std::string> seen{kModelInput};
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    const std::string at = where + ": layers[" + std::to_string(i) + "]";
    if (layer.name.empty()) throw InputError(at + ".name", "is empty", "a unique layer name");
    if (seen.count(layer.name)) {
      throw InputError(at + ".name", "'" + layer.name + "' is used twice", "unique layer names");
    }
    for (const std::string& input : layer.inputs) {
      if (!seen.count(input)) {
        throw InputError(at + ".inputs", "'" + input + "' names no earlier layer",
                         "names of earlier layers or 'input', in topological order");
      }
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
    if (layer.sparse && (layer.sparse_rows < 1 || !(layer.sparse_rows_per_sample >= 0))) {
      throw InputError(at + ".sparse_rows", "is missing or < 1 on a sparse layer",
                       "the table's row count and rows looked up per sample");
    }
    seen.insert(layer.name);
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
