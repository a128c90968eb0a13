// Small text helpers shared by every layer: the "one of a, b, c" lists that
// InputError messages offer, the range lists results echo, and the shortening
// that keeps an echoed user value to one short line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim {

// `parts` with `separator` between neighbours: join({"a", "b"}, ", ") is
// "a, b"; an empty list gives "".
std::string join(const std::vector<std::string>& parts, const std::string& separator);

// `text` made fit for one line of an error message: control characters
// (newlines, tabs, ...) written as \n, \t or \xNN, and a text longer than
// `max_bytes` cut (never inside a UTF-8 character) to its first ones followed
// by "... (N bytes)", so a 50 MB value echoes as a short line.
std::string shorten(std::string_view text, size_t max_bytes = 80);

}  // namespace trainsim
