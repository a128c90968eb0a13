// Field readers for trainsim's JSON files; see json_fields.hpp.
#include "model/json_fields.hpp"

#include <cmath>
#include <iostream>

#include "model/error.hpp"
#include "model/output_file.hpp"
#include "model/strings.hpp"
#include "model/text_file.hpp"
#include "model/units.hpp"

namespace trainsim {

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path, "a trainsim JSON file", kMaxJsonFileBytes);
  check_json_depth(text, path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax errors and numbers out of range
    throw InputError(path, std::string("is not valid JSON: ") + e.what(), "a trainsim JSON file");
  }
}

void check_json_depth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false;
  int64_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw InputError(where, "nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                                    " levels deep (line " + std::to_string(line) + ")",
                         "at most " + std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  write_output_file(path, value.dump(2) + "\n", std::cout, "output file");
}

std::string echo_json(const nlohmann::json& value) {
  constexpr size_t kEchoBytes = 80;
  if (value.is_string()) {  // shortened without dumping, so a 50 MB string is not copied whole
    return "\"" + shorten(value.get_ref<const std::string&>(), kEchoBytes) + "\"";
  }
  return shorten(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kEchoBytes);
}

void require_format(const nlohmann::json& doc, const std::string& kind, const std::string& where) {
  if (!doc.is_object()) throw InputError(where, "is not a JSON object", "a trainsim." + kind + " document");
  const std::string expected = "trainsim." + kind + "/1";
  auto it = doc.find("format");
  if (it == doc.end() || !it->is_string()) {
    throw InputError(where + ": format", "is missing", "\"format\": \"" + expected + "\"");
  }
  if (it->get<std::string>() != expected) {
    throw InputError(where + ": format", "is '" + it->get<std::string>() + "'", expected);
  }
}

const nlohmann::json& require_field(const nlohmann::json& object, const std::string& key,
                                    const std::string& where) {
  if (!object.is_object()) throw InputError(where, "is not a JSON object", "an object with '" + key + "'");
  auto it = object.find(key);
  if (it == object.end()) throw InputError(where + "." + key, "is missing", "a value");
  return *it;
}

double require_number(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_number()) throw InputError(where + "." + key, "is " + echo_json(value), "a number");
  const double x = value.get<double>();
  if (!std::isfinite(x)) throw InputError(where + "." + key, "is not finite", "a finite number");
  return x;
}

double require_nonnegative(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const double x = require_number(object, key, where);
  if (x < 0) throw InputError(where + "." + key, "is " + format_number(x), "a value >= 0");
  return x;
}

double require_positive(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const double x = require_number(object, key, where);
  if (x <= 0) throw InputError(where + "." + key, "is " + format_number(x), "a value > 0");
  return x;
}

int64_t require_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                        int64_t min_value) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_number_integer()) throw InputError(where + "." + key, "is " + echo_json(value), "an integer");
  const int64_t x = value.get<int64_t>();
  if (x < min_value) {
    throw InputError(where + "." + key, "is " + std::to_string(x), "an integer >= " + std::to_string(min_value));
  }
  return x;
}

std::string require_string(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_string()) throw InputError(where + "." + key, "is " + echo_json(value), "a string");
  return value.get<std::string>();
}

std::vector<std::string> require_string_list(const nlohmann::json& object, const std::string& key,
                                             const std::string& where) {
  const nlohmann::json& value = require_field(object, key, where);
  if (!value.is_array()) throw InputError(where + "." + key, "is " + echo_json(value), "a list of strings");
  std::vector<std::string> list;
  for (const auto& item : value) {
    if (!item.is_string()) throw InputError(where + "." + key, "has " + echo_json(item), "strings only");
    list.push_back(item.get<std::string>());
  }
  return list;
}

bool optional_bool(const nlohmann::json& object, const std::string& key, const std::string& where,
                   bool fallback) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_boolean()) throw InputError(where + "." + key, "is " + echo_json(*it), "true or false");
  return it->get<bool>();
}

std::optional<double> optional_nonnegative(const nlohmann::json& object, const std::string& key,
                                           const std::string& where) {
  if (!object.contains(key)) return std::nullopt;
  return require_nonnegative(object, key, where);
}

}  // namespace trainsim
