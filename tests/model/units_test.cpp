// Human units at the edges: parsing byte counts and printing quantities.
#include "model/units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model/error.hpp"

namespace trainsim {
namespace {

TEST(Units, ParsesDecimalAndBinaryByteSuffixes) {
  EXPECT_DOUBLE_EQ(parse_bytes("1048576", "x"), 1048576.0);
  EXPECT_DOUBLE_EQ(parse_bytes("25MB", "x"), 25e6);
  EXPECT_DOUBLE_EQ(parse_bytes("25 MiB", "x"), 25.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bytes("80GiB", "x"), 80.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bytes("1.5e9", "x"), 1.5e9);
}

TEST(Units, RejectsWhatIsNotAByteCount) {
  EXPECT_THROW(parse_bytes("25XB", "--set bucket_bytes"), InputError);
  EXPECT_THROW(parse_bytes("-3MB", "x"), InputError);
  EXPECT_THROW(parse_bytes("lots", "x"), InputError);
  EXPECT_THROW(parse_number("12Q", "x"), InputError);
}

TEST(Units, PrintsWithTheRightPrefix) {
  EXPECT_EQ(format_seconds(0.2123), "212.3 ms");
  EXPECT_EQ(format_seconds(1.5), "1.5 s");
  EXPECT_EQ(format_seconds(35e-6), "35 us");
  EXPECT_EQ(format_bytes(1024.0 * 1024 * 528), "528.0 MiB");
  EXPECT_EQ(format_count(11.8e12), "11.8T");
  EXPECT_EQ(format_count(8.1e3), "8100");
  EXPECT_EQ(format_count(35.7e3), "35.7k");
  EXPECT_EQ(parse_number("12G", "x"), 12e9);
}

TEST(Units, PercentsKeepTwoDigitsAndWholeOnesFromAHundred) {
  EXPECT_EQ(format_percent(0.0042), "0.42%");
  EXPECT_EQ(format_percent(0.123), "12%");
  EXPECT_EQ(format_percent(0.996), "100%");
  EXPECT_EQ(format_percent(2.5), "250%");
  EXPECT_EQ(format_percent(-1.5), "-150%");
  EXPECT_EQ(format_percent(4.2e-11), "0%");  // not "4.2e-09%"
  EXPECT_EQ(format_percent(-3e-5), "0%");
  EXPECT_EQ(format_percent(5e-5), "0.005%");
}

TEST(Units, PrintsHugeAndNonFiniteQuantitiesReadably) {
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024 * 1024 * 1024), "3.0 PiB");
  EXPECT_EQ(format_bytes(1e30), "8.67e+11 EiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<double>::infinity()), "unbounded");
  EXPECT_EQ(format_bytes(std::nan("")), "unknown");
  EXPECT_EQ(format_seconds(std::numeric_limits<double>::infinity()), "unbounded");
  EXPECT_EQ(format_count(std::nan("")), "unknown");
}

TEST(Units, RejectsByteCountsThatOverflow) {
  EXPECT_THROW(parse_bytes("1e308GiB", "--memory-limit"), InputError);
  EXPECT_THROW(parse_number("1e308T", "x"), InputError);
}

}  // namespace
}  // namespace trainsim
