// PyTorch profiler traces (`profile --import-kineto`): read, then imported
// at the granularities (auto takes the module spans where there are some).
#include "profiles/kineto/kineto_import.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "trace.json");
  trainsim::fuzz::expect_input_error([&] {
    const trainsim::KinetoTrace trace = trainsim::read_kineto_trace(path);
    for (const char* granularity : {"auto", "layer", "op", "2"}) {
      trainsim::fuzz::expect_input_error([&] { trainsim::import_kineto(trace, {granularity, 0, ""}); });
    }
  });
  return 0;
}
