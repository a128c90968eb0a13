// Running the trainsim command line in-process from tests.
#pragma once

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

}  // namespace trainsim::testing_fixtures
