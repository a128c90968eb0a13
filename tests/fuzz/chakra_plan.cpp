// A plan's Chakra execution traces (`simulate --import-chakra`): the input as
// worker 0's file, read back into a plan.
#include "sim/chakra/chakra.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "trace.0.et");
  const std::string prefix = path.substr(0, path.size() - std::string(".0.et").size());
  trainsim::fuzz::expect_input_error([&] { trainsim::read_chakra_plan(prefix); });
  return 0;
}
