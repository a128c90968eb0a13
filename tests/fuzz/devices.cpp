// `--devices cpu:N` of run and validate (parse_cpu_devices).
#include <string>

#include "tests/fuzz/fuzz_input.hpp"
#include "tools/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  trainsim::fuzz::expect_input_error([&] { trainsim::parse_cpu_devices(text); });
  return 0;
}
