// InputError: bad input from a user (a file, a flag, a field), raised at the
// boundary where the input is read. Only tools/trainsim turns it into an exit
// code; its message is "<where>: <what> (<expected>)".
#pragma once

#include <stdexcept>
#include <string>

namespace trainsim {

class InputError : public std::runtime_error {
 public:
  // where: the file, flag or field ("vgg16.json: layers[3].forward_s");
  // what: what is wrong ("is -1"); expected: what would be right ("a time >= 0 s").
  InputError(std::string where, std::string what, std::string expected)
      : std::runtime_error(where + ": " + what + " (" + expected + ")"),
        where_(std::move(where)),
        what_(std::move(what)),
        expected_(std::move(expected)) {}

  const std::string& where() const { return where_; }
  const std::string& problem() const { return what_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string where_;
  std::string what_;
  std::string expected_;
};

// Always-on internal check: a broken invariant is a bug, not bad input.
#define TRAINSIM_CHECK(cond, msg)                                              \
  do {                                                                         \
    if (!(cond)) {                                                             \
      throw std::logic_error(std::string(__FILE__) + ":" +                     \
                             std::to_string(__LINE__) + ": " + (msg));         \
    }                                                                          \
  } while (false)

}  // namespace trainsim
