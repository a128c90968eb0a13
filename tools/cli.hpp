// The trainsim command line as a function, so tests run it in-process.
// Exit status: 0 success, 1 a failure while running, 2 bad usage or input
// (one line `trainsim: error: <where>: <what> (<expected>)` on err).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace trainsim {

// `args` without the program name, e.g. {"predict", "--model", "vgg16", ...}.
int run_trainsim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace trainsim
