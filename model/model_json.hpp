// JSON form of a model (`trainsim.model/1`): what `zoo show --json` prints
// and what `--model FILE.json` reads. Validated on read.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/layer.hpp"

namespace trainsim {

// The document; `batch` scales the per-sample figures into whole-batch ones
// (activation_bytes, flops) printed beside them for the reader.
nlohmann::json model_to_json(const Model& model, int64_t batch);

// Parses and validates; `where` names the source in errors.
Model model_from_json(const nlohmann::json& doc, const std::string& where);

Model read_model_file(const std::string& path);

}  // namespace trainsim
