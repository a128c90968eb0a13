// `--straggler PROB:SLOWDOWN` of predict and simulate (parse_sim_options).
#include <string>

#include "tests/fuzz/fuzz_input.hpp"
#include "tools/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  trainsim::fuzz::expect_input_error([&] { trainsim::parse_sim_options(text, 0, 1); });
  return 0;
}
