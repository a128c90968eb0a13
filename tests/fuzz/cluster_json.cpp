// Cluster JSON (`--cluster FILE`, trainsim.cluster/1): read and validated.
#include "profiles/cluster.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "cluster.json");
  trainsim::fuzz::expect_input_error([&] { trainsim::load_cluster(path); });
  return 0;
}
