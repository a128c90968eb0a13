// Model JSON (`--model FILE.json`, trainsim.model/1): read and validated as
// the command line reads it.
#include "model/model_json.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "model.json");
  trainsim::fuzz::expect_input_error([&] { trainsim::read_model_file(path); });
  return 0;
}
