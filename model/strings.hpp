// Small text helpers shared by every layer: the "one of a, b, c" lists that
// InputError messages offer, and the range lists results echo.
#pragma once

#include <string>
#include <vector>

namespace trainsim {

// `parts` with `separator` between neighbours: join({"a", "b"}, ", ") is
// "a, b"; an empty list gives "".
std::string join(const std::vector<std::string>& parts, const std::string& separator);

}  // namespace trainsim
