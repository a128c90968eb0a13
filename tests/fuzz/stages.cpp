// Layer ranges (`--set stages=0-9,10-20`, cgdp's chunks): text and JSON forms,
// checked against models of 1, 16 and 3,338 layers (resnet1001).
#include <string>

#include "sim/cost/strategy_config.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const int64_t layers : {1, 16, 3338}) {
    fuzz::expect_input_error([&] {
      StrategyConfig config;
      config.set("stages", text, "--set stages");
      config.get_ranges("stages", layers);
    });
  }
  return 0;
}
