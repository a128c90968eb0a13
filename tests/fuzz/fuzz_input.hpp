// What every harness shares: the input as a file, for the readers that take a
// path, and the one outcome besides success that a harness accepts. Anything
// else (another exception, a crash, a hang, a leak, undefined behaviour) ends
// the run as a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/error.hpp"

namespace trainsim::fuzz {

// Writes the input to this process's own file (named after `name`, in
// /dev/shm where there is one, since rewriting a file on disk for every input
// halves the rate, else under TMPDIR) and returns its path; the file is
// rewritten for every input and removed when the process exits.
inline const std::string& input_file(const uint8_t* data, size_t size, const char* name) {
  struct TempFile {
    std::string path;
    ~TempFile() { std::remove(path.c_str()); }
  };
  static const TempFile temp{
      ((std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                  : std::filesystem::temp_directory_path()) /
       ("trainsim-fuzz-" + std::to_string(getpid()) + "-" + name))
          .string()};
  const std::string& path = temp.path;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// Runs `parse`; bad input (InputError) is the expected way to fail.
template <class Parse>
void expect_input_error(Parse&& parse) {
  try {
    parse();
  } catch (const InputError&) {
  }
}

}  // namespace trainsim::fuzz
