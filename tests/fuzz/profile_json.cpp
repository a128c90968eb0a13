// Profile JSON (`--profile FILE`, trainsim.profile/1): read and validated.
#include "profiles/profile.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = trainsim::fuzz::input_file(data, size, "profile.json");
  trainsim::fuzz::expect_input_error([&] { trainsim::read_profile_file(path); });
  return 0;
}
