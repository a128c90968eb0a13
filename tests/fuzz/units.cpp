// Sizes and numbers with units (`--memory-limit 16GB`, `bucket_bytes=25MiB`,
// `--straggler 0.5:1k`), parsed and printed back as tables print them.
#include <string>

#include "model/units.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_input_error([&] {
    const double bytes = parse_bytes(text, "--memory-limit");
    format_bytes(bytes);
    format_number(bytes);
  });
  fuzz::expect_input_error([&] {
    const double number = parse_number(text, "--set");
    format_number(number);
    format_seconds(number);
    format_count(number);
    format_ratio(number);
  });
  return 0;
}
