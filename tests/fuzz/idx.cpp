// IDX files, gzip'ed or plain (the Fashion-MNIST reader): read as an images
// file and as a labels file.
#include "exec/data/idx.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "idx");
  trainsim::fuzz::expect_input_error([&] { trainsim::read_idx(path, trainsim::kIdxImagesMagic); });
  trainsim::fuzz::expect_input_error([&] { trainsim::read_idx(path, trainsim::kIdxLabelsMagic); });
  return 0;
}
