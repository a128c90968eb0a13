// `--set key=value`: split as the command line splits it, stored by
// StrategyConfig::set, then read back by every kind of getter.
#include <string>

#include "sim/cost/driver.hpp"
#include "sim/cost/strategy_config.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_input_error([&] {
    const Setting s = parse_setting(text, "--set");
    StrategyConfig stored;
    stored.set(s.key, s.value, s.where);
    auto read = [&](auto&& get) {
      StrategyConfig config = stored;
      fuzz::expect_input_error([&] { get(config); });
    };
    read([&](StrategyConfig& c) { c.get_int(s.key, 1, 1); });
    read([&](StrategyConfig& c) { c.get_number(s.key, 0, 0); });
    read([&](StrategyConfig& c) { c.get_bool(s.key, false); });
    read([&](StrategyConfig& c) { c.get_choice(s.key, "ring", {"ring", "tree"}); });
    read([&](StrategyConfig& c) { c.get_bytes(s.key, 1); });
    read([&](StrategyConfig& c) { c.get_int_list(s.key); });
    read([&](StrategyConfig& c) { c.get_ranges(s.key, 16); });
    read([&](StrategyConfig& c) { c.get_json(s.key); });
    read([&](StrategyConfig& c) { c.check_all_used("fuzz"); });
  });
  return 0;
}
