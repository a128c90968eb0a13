// Reading JSON fields with errors that name the file, the field and what was
// expected. Every reader of a trainsim file (model, profile, cluster, config)
// goes through these, so a malformed file never crashes and never half-parses.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim {

// Limits on what read_json_file accepts; real files stay far below them
// (a 100,000-layer profile is about 25 MB and 4 levels deep).
inline constexpr int64_t kMaxJsonFileBytes = int64_t{256} << 20;  // 256 MiB
inline constexpr int kMaxJsonDepth = 64;                         // nested arrays and objects

// Parses `path` as JSON; InputError if it is missing, a directory, larger
// than kMaxJsonFileBytes, nested deeper than kMaxJsonDepth, or not JSON.
nlohmann::json read_json_file(const std::string& path);

// InputError naming `where` if `text` nests arrays and objects deeper than
// kMaxJsonDepth; checked before parsing, so nothing recurses on such input.
void check_json_depth(std::string_view text, const std::string& where);

// Writes `value` (indented) to `path` as write_output_file does ("-" is
// standard output; files are replaced only once fully written).
void write_json_file(const std::string& path, const nlohmann::json& value);

// A JSON value as an error message echoes it: compact and shortened.
std::string echo_json(const nlohmann::json& value);

// Checks `"format": "trainsim.<kind>/1"`.
void require_format(const nlohmann::json& doc, const std::string& kind, const std::string& where);

// `where` is the path to the object (e.g. "vgg16.json: layers[3]").
const nlohmann::json& require_field(const nlohmann::json& object, const std::string& key,
                                    const std::string& where);
double require_number(const nlohmann::json& object, const std::string& key, const std::string& where);
// A number that must be finite and >= 0 (times, bytes, rates).
double require_nonnegative(const nlohmann::json& object, const std::string& key, const std::string& where);
// A number that must be finite and > 0.
double require_positive(const nlohmann::json& object, const std::string& key, const std::string& where);
int64_t require_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                        int64_t min_value);
std::string require_string(const nlohmann::json& object, const std::string& key, const std::string& where);
// A list whose every element is a string (a layer's `inputs`); may be empty.
std::vector<std::string> require_string_list(const nlohmann::json& object, const std::string& key,
                                             const std::string& where);
bool optional_bool(const nlohmann::json& object, const std::string& key, const std::string& where,
                   bool fallback);
std::optional<double> optional_nonnegative(const nlohmann::json& object, const std::string& key,
                                           const std::string& where);

}  // namespace trainsim
