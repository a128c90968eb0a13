// Human units at the edges: parsing "80GiB", "25GB/s", "10us" from flags and
// printing seconds, bytes and rates in tables. Inside, everything is SI base
// units in doubles (seconds, bytes, bytes/s, FLOP/s).
#pragma once

#include <string>

namespace trainsim {

// Shortest round-trip text of a double ("0.25", "1e-05").
std::string format_number(double value);

// "212.3 ms", "1.52 s", "35.0 us". Every formatter below prints "unbounded"
// for an infinite value and "unknown" for NaN.
std::string format_seconds(double seconds);

// "528.0 MiB", "11.2 GiB", up to EiB ("3.2e+06 EiB" beyond).
std::string format_bytes(double bytes);

// "1.2k", "35.7", "8.1M": a count with a metric suffix.
std::string format_count(double count);

// "3.85x": a speedup or other ratio, two decimals.
std::string format_ratio(double ratio);

// "0.42%", "12%": a fraction as a percentage, two significant digits.
std::string format_percent(double fraction);

// Parses a byte count: "1024", "25MB", "25 MiB", "1.5e9", "80GiB".
// Throws InputError naming `where` on anything else.
double parse_bytes(const std::string& text, const std::string& where);

// Parses a number with an optional metric suffix (k, M, G, T): "1e-5", "12G".
double parse_number(const std::string& text, const std::string& where);

}  // namespace trainsim
