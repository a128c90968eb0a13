// Unit parsing and formatting; see units.hpp.
#include "model/units.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "model/error.hpp"

namespace trainsim {
namespace {

std::string printf_text(const char* format, double value, const char* suffix) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value, suffix);
  return buffer;
}

// Splits "25MiB" into 25 and "MiB"; false if the number part is not a number.
bool split_number(std::string_view text, double& value, std::string_view& suffix) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return false;
  suffix = std::string_view(ptr, static_cast<size_t>(end - ptr));
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  return std::isfinite(value);
}

double metric_factor(std::string_view prefix, bool binary, bool& ok) {
  ok = true;
  const double base = binary ? 1024.0 : 1000.0;
  if (prefix.empty()) return 1.0;
  switch (prefix.front()) {
    case 'k': case 'K': return base;
    case 'M': return base * base;
    case 'G': return base * base * base;
    case 'T': return base * base * base * base;
    default: ok = false; return 1.0;
  }
}

// What a table shows for a quantity that is not a number: an overflow is
// "unbounded", NaN "unknown", never "inf TiB".
std::string non_finite_text(double value) {
  if (std::isnan(value)) return "unknown";
  return value > 0 ? "unbounded" : "-unbounded";
}

}  // namespace

std::string format_number(double value) {
  char buffer[32];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, ptr) : std::string("?");
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return non_finite_text(seconds);
  const double a = std::fabs(seconds);
  if (a >= 1.0) return printf_text("%.3g %s", seconds, "s");
  if (a >= 1e-3) return printf_text("%.4g %s", seconds * 1e3, "ms");
  if (a >= 1e-6) return printf_text("%.4g %s", seconds * 1e6, "us");
  return printf_text("%.4g %s", seconds * 1e9, "ns");
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return non_finite_text(bytes);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLastUnit = 6;
  int unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit < kLastUnit) {
    bytes /= 1024.0;
    ++unit;
  }
  if (std::fabs(bytes) >= 1e4) return printf_text("%.3g %s", bytes, units[unit]);  // beyond ten thousand EiB
  return printf_text(unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
}

std::string format_count(double count) {
  if (!std::isfinite(count)) return non_finite_text(count);
  const double a = std::fabs(count);
  if (a >= 1e15) return printf_text("%.3g%s", count / 1e15, "P");
  if (a >= 1e12) return printf_text("%.3g%s", count / 1e12, "T");
  if (a >= 1e9) return printf_text("%.3g%s", count / 1e9, "G");
  if (a >= 1e6) return printf_text("%.3g%s", count / 1e6, "M");
  if (a >= 1e4) return printf_text("%.3g%s", count / 1e3, "k");
  return printf_text("%.4g%s", count, "");
}

std::string format_ratio(double ratio) { return printf_text("%.2f%s", ratio, "x"); }

std::string format_percent(double fraction) {
  const double percent = 100 * fraction;
  // Two significant digits, but whole percents from 100 on (%.2g would write
  // 1e+02) and none below a hundredth of a percent (nor 4.2e-09%).
  if (std::abs(percent) < 0.005) return "0%";
  return std::abs(percent) >= 99.5 ? printf_text("%.0f%s", percent, "%") : printf_text("%.2g%s", percent, "%");
}

double parse_bytes(const std::string& text, const std::string& where) {
  double value = 0;
  std::string_view suffix;
  const char* expected = "a byte count such as 1048576, 25MB or 80GiB";
  if (!split_number(text, value, suffix) || value < 0) throw InputError(where, "'" + text + "'", expected);
  bool binary = suffix.size() >= 2 && suffix[1] == 'i';
  std::string_view rest = suffix;
  if (!rest.empty() && rest.back() == 'B') rest.remove_suffix(1);
  if (binary) rest.remove_suffix(1);
  bool ok = rest.size() <= 1;
  const double factor = ok ? metric_factor(rest, binary, ok) : 1.0;
  if (!ok || !std::isfinite(value * factor)) throw InputError(where, "'" + text + "'", expected);
  return value * factor;
}

double parse_number(const std::string& text, const std::string& where) {
  double value = 0;
  std::string_view suffix;
  const char* expected = "a number, optionally with k, M, G or T";
  if (!split_number(text, value, suffix)) throw InputError(where, "'" + text + "'", expected);
  bool ok = suffix.size() <= 1;
  const double factor = ok ? metric_factor(suffix, false, ok) : 1.0;
  if (!ok || !std::isfinite(value * factor)) throw InputError(where, "'" + text + "'", expected);
  return value * factor;
}

}  // namespace trainsim
