// Text helpers; see strings.hpp.
#include "model/strings.hpp"

#include <cstdio>

namespace trainsim {
namespace {

// Appends `c`, written visibly if it is a control character.
void append_visible(std::string& out, char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (byte < 0x20 || byte == 0x7f) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
    out += escaped;
  } else {
    out += c;
  }
}

}  // namespace

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += separator;
    text += parts[i];
  }
  return text;
}

std::string shorten(std::string_view text, size_t max_bytes) {
  // The first bytes of `text`, written visibly, up to `budget` output bytes,
  // ending before a UTF-8 continuation byte (10xxxxxx) never inside a character.
  const auto visible_prefix = [text](size_t budget, size_t& used) {
    std::string out;
    for (used = 0; used < text.size(); ++used) {
      const bool continuation = (static_cast<unsigned char>(text[used]) & 0xC0) == 0x80;
      if (out.size() >= budget && !continuation) break;
      append_visible(out, text[used]);
    }
    return out;
  };
  size_t used = 0;
  std::string whole = visible_prefix(max_bytes + 1, used);
  if (used == text.size() && whole.size() <= max_bytes) return whole;
  std::string cut = visible_prefix(max_bytes > 32 ? max_bytes - 24 : max_bytes, used);
  return cut + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace trainsim
