// StrategyConfig getters; see strategy_config.hpp.
#include "sim/cost/strategy_config.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model/error.hpp"
#include "model/json_fields.hpp"
#include "model/strings.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  return parts;
}

int64_t parse_index(const std::string& text, const std::string& where, const std::string& expected) {
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw InputError(where, "'" + text + "'", expected);
}

}  // namespace

void StrategyConfig::set(const std::string& key, const std::string& text, const std::string& where) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;
  set_json(key, value, where);
}

void StrategyConfig::set_json(const std::string& key, const nlohmann::json& value, const std::string& where) {
  if (key.empty()) throw InputError(where, "has an empty key", "key=value");
  values_[key] = value;
  origins_[key] = where;
}

StrategyConfig StrategyConfig::from_resolved(const nlohmann::json& resolved, const std::string& where) {
  if (!resolved.is_object()) throw InputError(where, "is not a JSON object", "the settings a plan resolved");
  StrategyConfig config;
  for (const auto& [key, value] : resolved.items()) config.set_json(key, value, where + ": " + key);
  return config;
}

std::string StrategyConfig::where_of(const std::string& key) const {
  auto it = origins_.find(key);
  return it != origins_.end() ? it->second : "--set " + key;
}

const nlohmann::json* StrategyConfig::find(const std::string& key) {
  used_.insert(key);
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &*it;
}

int64_t StrategyConfig::get_int(const std::string& key, int64_t fallback, int64_t min_value) {
  int64_t value = fallback;
  if (const nlohmann::json* j = find(key)) {
    const std::string expected = "an integer >= " + std::to_string(min_value);
    if (!j->is_number_integer()) throw InputError(where_of(key), "is " + echo_json(*j), expected);
    value = j->get<int64_t>();
    if (value < min_value) throw InputError(where_of(key), "is " + std::to_string(value), expected);
  }
  resolved_[key] = value;
  return value;
}

double StrategyConfig::get_number(const std::string& key, double fallback, double min_value) {
  double value = fallback;
  if (const nlohmann::json* j = find(key)) {
    const std::string expected = "a number >= " + format_number(min_value);
    if (!j->is_number()) throw InputError(where_of(key), "is " + echo_json(*j), expected);
    value = j->get<double>();
    if (!std::isfinite(value) || value < min_value) {
      throw InputError(where_of(key), "is " + format_number(value), expected);
    }
  }
  resolved_[key] = value;
  return value;
}

bool StrategyConfig::get_bool(const std::string& key, bool fallback) {
  bool value = fallback;
  if (const nlohmann::json* j = find(key)) {
    if (!j->is_boolean()) throw InputError(where_of(key), "is " + echo_json(*j), "true or false");
    value = j->get<bool>();
  }
  resolved_[key] = value;
  return value;
}

std::string StrategyConfig::get_choice(const std::string& key, const std::string& fallback,
                                       const std::vector<std::string>& choices) {
  std::string value = fallback;
  if (const nlohmann::json* j = find(key)) {
    const std::string names = join(choices, ", ");
    if (!j->is_string()) throw InputError(where_of(key), "is " + echo_json(*j), "one of " + names);
    value = j->get<std::string>();
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
      throw InputError(where_of(key), "is '" + value + "'", "one of " + names);
    }
  }
  resolved_[key] = value;
  return value;
}

double StrategyConfig::get_bytes(const std::string& key, double fallback) {
  double value = fallback;
  if (const nlohmann::json* j = find(key)) {
    if (j->is_number()) {
      value = j->get<double>();
      if (!std::isfinite(value) || value <= 0) throw InputError(where_of(key), "is " + echo_json(*j), "bytes > 0");
    } else if (j->is_string()) {
      value = parse_bytes(j->get<std::string>(), where_of(key));
      if (value <= 0) throw InputError(where_of(key), "is " + echo_json(*j), "bytes > 0");
    } else {
      throw InputError(where_of(key), "is " + echo_json(*j), "a byte count such as 25MB");
    }
  }
  resolved_[key] = value;
  return value;
}

std::optional<nlohmann::json> StrategyConfig::get_json(const std::string& key) {
  const nlohmann::json* j = find(key);
  if (!j) return std::nullopt;
  resolved_[key] = *j;
  return *j;
}

std::vector<int64_t> StrategyConfig::get_int_list(const std::string& key) {
  std::vector<int64_t> list;
  const nlohmann::json* j = find(key);
  if (!j) return list;
  const std::string expected = "a list of integers such as 1,2,1";
  if (j->is_number_integer()) {
    list.push_back(j->get<int64_t>());
  } else if (j->is_array()) {
    for (const auto& x : *j) {
      if (!x.is_number_integer()) throw InputError(where_of(key), "has " + echo_json(x), expected);
      list.push_back(x.get<int64_t>());
    }
  } else if (j->is_string()) {
    for (const std::string& part : split(j->get<std::string>(), ',')) {
      list.push_back(parse_index(part, where_of(key), expected));
    }
  } else {
    throw InputError(where_of(key), "is " + echo_json(*j), expected);
  }
  resolved_[key] = list;
  return list;
}

std::vector<LayerRange> StrategyConfig::get_ranges(const std::string& key, int64_t layer_count) {
  std::vector<LayerRange> ranges;
  const nlohmann::json* j = find(key);
  if (!j) return ranges;
  const std::string where = where_of(key);
  const std::string expected = "contiguous layer ranges such as 0-9,10-20 or [[0,9],[10,20]]";
  if (j->is_array()) {
    for (const auto& r : *j) {
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer()) {
        throw InputError(where, "has " + echo_json(r), expected);
      }
      ranges.push_back({r[0].get<int64_t>(), r[1].get<int64_t>()});
    }
  } else if (j->is_string()) {
    for (const std::string& part : split(j->get<std::string>(), ',')) {
      const auto dash = part.find('-');
      if (dash == std::string::npos) {
        const int64_t single = parse_index(part, where, expected);
        ranges.push_back({single, single});
      } else {
        ranges.push_back({parse_index(part.substr(0, dash), where, expected),
                          parse_index(part.substr(dash + 1), where, expected)});
      }
    }
  } else {
    throw InputError(where, "is " + echo_json(*j), expected);
  }
  int64_t next = 0;
  for (const LayerRange& r : ranges) {
    if (r.first != next || r.last < r.first) {
      throw InputError(where, "range " + std::to_string(r.first) + "-" + std::to_string(r.last) +
                                  " does not start at layer " + std::to_string(next),
                       expected);
    }
    next = r.last + 1;
  }
  if (next != layer_count) {
    throw InputError(where, "covers layers 0-" + std::to_string(next - 1),
                     "ranges covering all " + std::to_string(layer_count) + " layers (0-" +
                         std::to_string(layer_count - 1) + ")");
  }
  resolved_[key] = ranges_to_json(ranges);
  return ranges;
}

void StrategyConfig::check_all_used(const std::string& strategy) const {
  for (const auto& [key, value] : values_.items()) {
    if (!used_.count(key)) {
      throw InputError(where_of(key), "is not a setting of " + strategy, "a key listed in docs/formats.md");
    }
  }
}

nlohmann::json ranges_to_json(const std::vector<LayerRange>& ranges) {
  nlohmann::json out = nlohmann::json::array();
  for (const LayerRange& r : ranges) out.push_back({r.first, r.last});
  return out;
}

}  // namespace trainsim
