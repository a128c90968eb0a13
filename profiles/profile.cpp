// trainsim.profile/1 reader, writer and validation.
#include "profiles/profile.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/layer.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

// Largest value a field may hold: far beyond any real layer, small enough that
// sums over millions of layers and batches stay finite.
constexpr double kMaxLayerSeconds = 1e6;  // 11.6 days for one pass of one layer
constexpr double kMaxLayerBytes = 1e18;   // an exabyte
constexpr double kMaxLayerFlops = 1e24;

void check_nonnegative(double value, const std::string& where, const char* unit, double max_value) {
  if (!std::isfinite(value) || value < 0 || value > max_value) {
    throw InputError(where, "is " + format_number(value),
                     std::string("finite ") + unit + " >= 0 and <= " + format_number(max_value));
  }
}

void check_seconds(double value, const std::string& where) {
  check_nonnegative(value, where, "seconds", kMaxLayerSeconds);
}
void check_bytes(double value, const std::string& where) { check_nonnegative(value, where, "bytes", kMaxLayerBytes); }
void check_flops(double value, const std::string& where) { check_nonnegative(value, where, "FLOPs", kMaxLayerFlops); }

}  // namespace

double touched_fraction(const LayerProfile& layer, int64_t workers) {
  if (!layer.sparse) return 1.0;
  std::vector<double> at_powers{layer.sparsity};  // at 1, 2, 4, ... workers
  at_powers.insert(at_powers.end(), layer.union_sparsity.begin(), layer.union_sparsity.end());
  const double x = std::log2(static_cast<double>(std::max<int64_t>(1, workers)));
  const auto last = static_cast<double>(at_powers.size() - 1);
  if (x >= last) return 1.0 - std::pow(1.0 - at_powers.back(), std::exp2(x - last));
  const auto k = static_cast<size_t>(x);
  const double t = x - static_cast<double>(k);
  return at_powers[k] + t * (at_powers[k + 1] - at_powers[k]);
}

void validate_profile(const Profile& profile, const std::string& where) {
  if (profile.layers.empty()) throw InputError(where + ": layers", "is empty", "at least one layer");
  if (profile.batch_size < 1) {
    throw InputError(where + ": batch_size", std::to_string(profile.batch_size), "a batch size >= 1");
  }
  if (std::find(kKnownDtypes.begin(), kKnownDtypes.end(), profile.dtype) == kKnownDtypes.end()) {
    throw InputError(where + ": dtype", "is '" + profile.dtype + "'", "one of " + join(kKnownDtypes, ", "));
  }
  std::unordered_set<std::string> seen{kModelInput};
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const LayerProfile& l = profile.layers[i];
    const std::string at = where + ": layers[" + std::to_string(i) + "]";
    if (l.name.empty()) throw InputError(at + ".name", "is empty", "a unique layer name");
    if (seen.count(l.name)) throw InputError(at + ".name", "'" + l.name + "' is used twice", "unique layer names");
    for (const std::string& input : l.inputs) {
      if (!seen.count(input)) {
        throw InputError(at + ".inputs", "'" + input + "' names no earlier layer",
                         "names of earlier layers or 'input', in topological order");
      }
    }
    check_seconds(l.forward_s, at + ".forward_s");
    check_seconds(l.backward_s, at + ".backward_s");
    check_bytes(l.param_bytes, at + ".param_bytes");
    check_bytes(l.activation_bytes, at + ".activation_bytes");
    if (!(l.sparsity > 0 && l.sparsity <= 1)) {
      throw InputError(at + ".sparsity", "is " + format_number(l.sparsity), "a fraction in (0, 1]");
    }
    double below = l.sparsity;
    for (size_t k = 0; k < l.union_sparsity.size(); ++k) {
      const double f = l.union_sparsity[k];
      if (!(f >= below && f <= 1)) {
        throw InputError(at + ".union_sparsity[" + std::to_string(k) + "]", "is " + format_number(f),
                         "a fraction in [" + format_number(below) + ", 1]: the rows of more workers' batches");
      }
      below = f;
    }
    if (l.backward_input_s) check_seconds(*l.backward_input_s, at + ".backward_input_s");
    if (l.backward_weight_s) check_seconds(*l.backward_weight_s, at + ".backward_weight_s");
    if (l.workspace_bytes) check_bytes(*l.workspace_bytes, at + ".workspace_bytes");
    if (l.update_s) check_seconds(*l.update_s, at + ".update_s");
    if (l.forward_fixed_s) check_seconds(*l.forward_fixed_s, at + ".forward_fixed_s");
    if (l.backward_fixed_s) check_seconds(*l.backward_fixed_s, at + ".backward_fixed_s");
    if (l.forward_fixed_s.value_or(0.0) > l.forward_s || l.backward_fixed_s.value_or(0.0) > l.backward_s) {
      throw InputError(at, "a fixed part exceeds its whole time", "forward_fixed_s <= forward_s and backward_fixed_s <= backward_s");
    }
    if (l.flops) check_flops(*l.flops, at + ".flops");
    seen.insert(l.name);
  }
}

nlohmann::json profile_to_json(const Profile& profile) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerProfile& l : profile.layers) {
    nlohmann::json j = {{"name", l.name},
                        {"inputs", l.inputs},
                        {"forward_s", l.forward_s},
                        {"backward_s", l.backward_s},
                        {"param_bytes", l.param_bytes},
                        {"activation_bytes", l.activation_bytes},
                        {"sparse", l.sparse},
                        {"sparsity", l.sparsity}};
    if (!l.union_sparsity.empty()) j["union_sparsity"] = l.union_sparsity;
    if (l.backward_input_s) j["backward_input_s"] = *l.backward_input_s;
    if (l.backward_weight_s) j["backward_weight_s"] = *l.backward_weight_s;
    if (l.workspace_bytes) j["workspace_bytes"] = *l.workspace_bytes;
    if (l.update_s) j["update_s"] = *l.update_s;
    if (l.forward_fixed_s) j["forward_fixed_s"] = *l.forward_fixed_s;
    if (l.backward_fixed_s) j["backward_fixed_s"] = *l.backward_fixed_s;
    if (l.flops) j["flops"] = *l.flops;
    layers.push_back(std::move(j));
  }
  return {{"format", "trainsim.profile/1"},
          {"model", profile.model},
          {"device", {{"name", profile.device.name}, {"kind", profile.device.kind}}},
          {"batch_size", profile.batch_size},
          {"dtype", profile.dtype},
          {"source", profile.source},
          {"layers", std::move(layers)}};
}

Profile profile_from_json(const nlohmann::json& doc, const std::string& where) {
  require_format(doc, "profile", where);
  Profile p;
  p.model = require_string(doc, "model", where);
  const nlohmann::json& device = require_field(doc, "device", where);
  p.device.name = require_string(device, "name", where + ": device");
  p.device.kind = require_string(device, "kind", where + ": device");
  if (p.device.kind != "gpu" && p.device.kind != "cpu") {
    throw InputError(where + ": device.kind", "is '" + p.device.kind + "'", "gpu or cpu");
  }
  p.batch_size = require_integer(doc, "batch_size", where, 1);
  p.dtype = doc.contains("dtype") ? require_string(doc, "dtype", where) : "fp32";
  p.source = doc.contains("source") ? require_string(doc, "source", where) : "unknown";
  const nlohmann::json& layers = require_field(doc, "layers", where);
  if (!layers.is_array()) throw InputError(where + ": layers", "is not a list", "a list of layer profiles");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string at = where + ": layers[" + std::to_string(i) + "]";
    const nlohmann::json& j = layers[i];
    LayerProfile l;
    l.name = require_string(j, "name", at);
    l.inputs = require_string_list(j, "inputs", at);
    l.forward_s = require_nonnegative(j, "forward_s", at);
    l.backward_s = require_nonnegative(j, "backward_s", at);
    l.param_bytes = require_nonnegative(j, "param_bytes", at);
    l.activation_bytes = require_nonnegative(j, "activation_bytes", at);
    l.sparse = optional_bool(j, "sparse", at, false);
    l.sparsity = j.contains("sparsity") ? require_number(j, "sparsity", at) : 1.0;
    if (j.contains("union_sparsity")) {
      const nlohmann::json& fractions = j.at("union_sparsity");
      if (!fractions.is_array()) {
        throw InputError(at + ".union_sparsity", "is not a list", "fractions of rows 2, 4, 8, ... workers touch");
      }
      for (size_t k = 0; k < fractions.size(); ++k) {
        if (!fractions[k].is_number()) {
          throw InputError(at + ".union_sparsity[" + std::to_string(k) + "]", "is not a number", "a fraction");
        }
        l.union_sparsity.push_back(fractions[k].get<double>());
      }
    }
    l.backward_input_s = optional_nonnegative(j, "backward_input_s", at);
    l.backward_weight_s = optional_nonnegative(j, "backward_weight_s", at);
    l.workspace_bytes = optional_nonnegative(j, "workspace_bytes", at);
    l.update_s = optional_nonnegative(j, "update_s", at);
    l.forward_fixed_s = optional_nonnegative(j, "forward_fixed_s", at);
    l.backward_fixed_s = optional_nonnegative(j, "backward_fixed_s", at);
    l.flops = optional_nonnegative(j, "flops", at);
    p.layers.push_back(std::move(l));
  }
  validate_profile(p, where);
  return p;
}

Profile read_profile_file(const std::string& path) { return profile_from_json(read_json_file(path), path); }

void write_profile_file(const std::string& path, const Profile& profile) {
  write_json_file(path, profile_to_json(profile));
}

double total_forward_s(const Profile& profile) {
  double t = 0;
  for (const auto& l : profile.layers) t += l.forward_s;
  return t;
}

double total_backward_s(const Profile& profile) {
  double t = 0;
  for (const auto& l : profile.layers) t += l.backward_s;
  return t;
}

double total_param_bytes(const Profile& profile) {
  double b = 0;
  for (const auto& l : profile.layers) b += l.param_bytes;
  return b;
}

}  // namespace trainsim
