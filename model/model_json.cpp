// trainsim.model/1 reader and writer.
#include "model/model_json.hpp"

#include "model/error.hpp"
#include "model/json_fields.hpp"

namespace trainsim {
namespace {

constexpr double kBytesPerElement = 4.0;  // fp32

std::vector<int64_t> read_shape(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_array()) throw InputError(where + "." + key, "is " + value.dump(), "a list of dimensions");
  std::vector<int64_t> shape;
  for (const auto& d : value) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) {
      throw InputError(where + "." + key, "has " + d.dump(), "integer dimensions >= 1");
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace

nlohmann::json model_to_json(const Model& model, int64_t batch) {
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& layer : model.layers) {
    nlohmann::json j = {{"name", layer.name},
                        {"op", layer.op},
                        {"inputs", layer.inputs},
                        {"output_shape", layer.output_shape},
                        {"param_count", layer.param_count},
                        {"forward_flops", layer.forward_flops},
                        {"activation_bytes", kBytesPerElement * element_count(layer.output_shape) * batch},
                        {"sparse", layer.sparse}};
    if (layer.sparse) {
      j["sparse_rows"] = layer.sparse_rows;
      j["sparse_rows_per_sample"] = layer.sparse_rows_per_sample;
      j["sparsity"] = sparse_fraction(layer, batch);
    }
    if (layer.op == "attention") {
      j["heads"] = layer.heads;
      j["causal"] = layer.causal;
    }
    layers.push_back(std::move(j));
  }
  return {{"format", "trainsim.model/1"},
          {"model", model.name},
          {"description", model.description},
          {"input_shape", model.input_shape},
          {"default_batch", model.default_batch},
          {"batch_size", batch},
          {"param_count", param_count(model)},
          {"forward_flops_per_sample", forward_flops(model)},
          {"layers", std::move(layers)}};
}

Model model_from_json(const nlohmann::json& doc, const std::string& where) {
  require_format(doc, "model", where);
  Model model;
  model.name = require_string(doc, "model", where);
  model.description = doc.contains("description") ? require_string(doc, "description", where) : "";
  model.input_shape = read_shape(doc, "input_shape", where);
  model.default_batch = require_integer(doc, "default_batch", where, 1);
  const nlohmann::json& layers = require_field(doc, "layers", where);
  if (!layers.is_array()) throw InputError(where + ".layers", "is not a list", "a list of layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string at = where + ": layers[" + std::to_string(i) + "]";
    const nlohmann::json& j = layers[i];
    Layer layer;
    layer.name = require_string(j, "name", at);
    layer.op = require_string(j, "op", at);
    layer.inputs = require_string_list(j, "inputs", at);
    layer.output_shape = read_shape(j, "output_shape", at);
    layer.param_count = require_integer(j, "param_count", at, 0);
    layer.forward_flops = require_nonnegative(j, "forward_flops", at);
    layer.sparse = optional_bool(j, "sparse", at, false);
    if (layer.sparse) {
      layer.sparse_rows = require_integer(j, "sparse_rows", at, 1);
      layer.sparse_rows_per_sample = require_nonnegative(j, "sparse_rows_per_sample", at);
    }
    if (j.contains("heads")) layer.heads = require_integer(j, "heads", at, 1);
    layer.causal = optional_bool(j, "causal", at, false);
    model.layers.push_back(std::move(layer));
  }
  validate_model(model, where);
  return model;
}

Model read_model_file(const std::string& path) { return model_from_json(read_json_file(path), path); }

}  // namespace trainsim
