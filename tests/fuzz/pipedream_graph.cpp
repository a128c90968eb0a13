// PipeDream's graph.txt (`profile --import-pipedream`): imported with the
// batch inferred, as without --batch, and with a batch given.
#include "profiles/pipedream_import.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "graph.txt");
  trainsim::fuzz::expect_input_error([&] { trainsim::import_pipedream_graph(path, std::nullopt); });
  trainsim::fuzz::expect_input_error([&] { trainsim::import_pipedream_graph(path, 32); });
  return 0;
}
