// Strategy settings from a config file (`predict --config FILE`): a JSON
// object of key: value read as cmd_predict.cpp reads it, then priced by every
// strategy's closed form, whose getters parse and check each value.
#include "model/json_fields.hpp"
#include "sim/cost/driver.hpp"
#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/small_job.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainsim;
  static const Profile profile = fuzz::small_profile();
  static const Cluster cluster = fuzz::small_cluster();
  const std::string& path = fuzz::input_file(data, size, "config.json");
  fuzz::expect_input_error([&] {
    const nlohmann::json doc = read_json_file(path);
    if (!doc.is_object()) throw InputError(path, "is not a JSON object", "{\"key\": value, ...}");
    std::vector<Setting> settings;
    for (const auto& [key, value] : doc.items()) {
      if (key == "format") continue;
      settings.push_back({key, value.is_string() ? value.get<std::string>() : value.dump(), path + ": " + key});
    }
    predict_analytic(profile, cluster, {}, settings);
  });
  return 0;
}
