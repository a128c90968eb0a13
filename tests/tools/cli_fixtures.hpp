// Running the trainsim command line in-process from tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.hpp"

namespace trainsim::testing_fixtures {

struct CliResult {
  int status;       // exit status
  std::string out;  // standard output
  std::string err;  // standard error
};

inline CliResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_trainsim(args, out, err);
  return {status, out.str(), err.str()};
}

// A folder of this test process's own, removed with everything in it.
class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("trainsim_cli_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` into the folder's file `name`; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace trainsim::testing_fixtures
