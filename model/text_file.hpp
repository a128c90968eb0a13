// Reading a whole input file with the errors a user can act on: a missing or
// unreadable file, a directory given where a file was meant, and a file (or
// a device such as /dev/zero) larger than the reader's stated limit.
#pragma once

#include <cstdint>
#include <string>

namespace trainsim {

// The contents of `path`. InputError naming `path` if it cannot be opened, is
// a directory, or holds more than `max_bytes`; `kind` says what file was
// expected ("a trainsim JSON file", "a PipeDream graph.txt").
std::string read_text_file(const std::string& path, const std::string& kind, int64_t max_bytes);

// The most read_text_file takes of one fortune file (the largest of
// Debian's fortunes is under 1 MB).
constexpr int64_t kMaxFortuneFileBytes = int64_t{64} << 20;

}  // namespace trainsim
