// StrategyConfig: a strategy's settings from `--set key=value` or a config
// file, read by typed getters that name the key in their errors and record
// the value they resolved (defaults included), so every result echoes the
// configuration it ran with. A key no getter asked for is reported unknown.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trainsim {

// A contiguous range of layers [first, last], 0-based and inclusive.
struct LayerRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t size() const { return last - first + 1; }
  bool operator==(const LayerRange&) const = default;
};

class StrategyConfig {
 public:
  StrategyConfig() = default;

  // The settings a plan resolved (Plan::config, Prediction::config) set
  // again, so a plan generated from another profile keeps the same
  // partition, chunks and queues. `where` names the origin in errors.
  static StrategyConfig from_resolved(const nlohmann::json& resolved, const std::string& where);

  // Records a raw value. Text that parses as JSON (numbers, lists, true) is
  // stored as JSON, anything else as a string. `where` names its origin
  // ("--set workers", "cfg.json: workers").
  void set(const std::string& key, const std::string& text, const std::string& where);
  void set_json(const std::string& key, const nlohmann::json& value, const std::string& where);

  bool has(const std::string& key) const { return values_.contains(key); }

  // Getters: the value if set (validated), else the fallback; each records the
  // resolved value into resolved().
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value);
  double get_number(const std::string& key, double fallback, double min_value);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices);
  // Bytes with optional units ("25MB", "26214400").
  double get_bytes(const std::string& key, double fallback);
  // Integers as a JSON list "[1,2,1]" or text "1,2,1"; empty if unset.
  std::vector<int64_t> get_int_list(const std::string& key);
  // Layer ranges as JSON "[[0,9],[10,20]]" or text "0-9,10-20"; empty if unset.
  // Checks they are contiguous, in order and cover layers 0..layer_count-1.
  std::vector<LayerRange> get_ranges(const std::string& key, int64_t layer_count);

  // The raw JSON value of a structured key (DSP's queues, say), if set; the
  // caller validates it and should record() what it resolved.
  std::optional<nlohmann::json> get_json(const std::string& key);

  // Records a value the model chose itself (a default partition, say).
  void record(const std::string& key, const nlohmann::json& value) { resolved_[key] = value; }

  // Throws InputError for a key that was set but never read by `strategy`.
  void check_all_used(const std::string& strategy) const;

  const nlohmann::json& resolved() const { return resolved_; }

 private:
  const nlohmann::json* find(const std::string& key);
  std::string where_of(const std::string& key) const;

  nlohmann::json values_ = nlohmann::json::object();
  std::map<std::string, std::string> origins_;
  std::set<std::string> used_;
  nlohmann::json resolved_ = nlohmann::json::object();
};

// JSON form of ranges: [[first, last], ...].
nlohmann::json ranges_to_json(const std::vector<LayerRange>& ranges);

}  // namespace trainsim
