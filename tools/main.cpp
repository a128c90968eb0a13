// trainsim's entry point: forwards argv to run_trainsim.
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return trainsim::run_trainsim(args, std::cout, std::cerr);
}
