// trainsim's entry point: sets the allocator policy every command trains
// and profiles under, then forwards argv to run_trainsim.
#include <iostream>
#include <string>
#include <vector>

#include "exec/tensor/memory_reuse.hpp"
#include "tools/cli.hpp"

int main(int argc, char** argv) {
  trainsim::reuse_freed_memory();
  std::vector<std::string> args(argv + 1, argv + argc);
  return trainsim::run_trainsim(args, std::cout, std::cerr);
}
