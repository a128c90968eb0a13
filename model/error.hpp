// InputError: bad input from a user (a file, a flag, a field), raised at the
// boundary where the input is read. Only tools/trainsim turns it into an exit
// code; its message is "<where>: <what> (<expected>)", one short line: each
// part is shortened (strings.hpp), so an echoed 50 MB value or a value with
// newlines still gives one line of a few hundred characters.
#pragma once

#include <stdexcept>
#include <string>

#include "model/strings.hpp"

namespace trainsim {

// Longest part of an InputError message, in bytes, before it is shortened.
inline constexpr size_t kMaxErrorWhereBytes = 150;
inline constexpr size_t kMaxErrorWhatBytes = 150;
inline constexpr size_t kMaxErrorExpectedBytes = 360;

class InputError : public std::runtime_error {
 public:
  // where: the file, flag or field ("vgg16.json: layers[3].forward_s");
  // what: what is wrong ("is -1"); expected: what would be right ("a time >= 0 s").
  InputError(const std::string& where, const std::string& what, const std::string& expected)
      : InputError(Parts{shorten(where, kMaxErrorWhereBytes), shorten(what, kMaxErrorWhatBytes),
                         shorten(expected, kMaxErrorExpectedBytes)}) {}

  const std::string& where() const { return parts_.where; }
  const std::string& problem() const { return parts_.what; }
  const std::string& expected() const { return parts_.expected; }

 private:
  struct Parts {
    std::string where, what, expected;
  };
  explicit InputError(Parts parts)
      : std::runtime_error(parts.where + ": " + parts.what + " (" + parts.expected + ")"), parts_(std::move(parts)) {}

  Parts parts_;
};

// A broken invariant: a bug in trainsim, never the user's input. what() is
// the message alone; location() is the source "file:line" for tests and
// debugging, which the command line does not print.
class InternalError : public std::logic_error {
 public:
  InternalError(const std::string& message, std::string location)
      : std::logic_error(message), location_(std::move(location)) {}
  const std::string& location() const { return location_; }

 private:
  std::string location_;
};

// Always-on internal check: a broken invariant is a bug, not bad input.
#define TRAINSIM_CHECK(cond, msg)                                                                     \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      throw ::trainsim::InternalError((msg), std::string(__FILE__) + ":" + std::to_string(__LINE__)); \
    }                                                                                                 \
  } while (false)

}  // namespace trainsim
