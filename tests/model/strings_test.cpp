// Text helpers: join, and shorten, which keeps every echoed value to one
// short line of an error message.
#include "model/strings.hpp"

#include <gtest/gtest.h>

#include <string>

namespace trainsim {
namespace {

TEST(Join, PutsTheSeparatorBetweenNeighboursOnly) {
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join({}, ", "), "");
}

TEST(Shorten, KeepsAShortTextWhole) { EXPECT_EQ(shorten("vgg16", 80), "vgg16"); }

TEST(Shorten, CutsA50MegabyteValueToItsStartAndLength) {
  const std::string huge(50'000'000, 'x');
  const std::string text = shorten(huge, 80);
  EXPECT_LE(text.size(), 80u);
  EXPECT_EQ(text.rfind("xxxxxxxx", 0), 0u) << text;
  EXPECT_NE(text.find("... (50000000 bytes)"), std::string::npos) << text;
}

TEST(Shorten, WritesControlCharactersSoTheLineStaysOne) {
  EXPECT_EQ(shorten("a\nb\tc\x01", 80), "a\\nb\\tc\\x01");
}

TEST(Shorten, NeverCutsInsideAUtf8Character) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\xC3\xA9";  // é, two bytes each
  const std::string cut = shorten(text, 57);
  const std::string kept = cut.substr(0, cut.find("..."));
  EXPECT_EQ(kept.size() % 2, 0u) << cut;
  EXPECT_NE(cut.find("(200 bytes)"), std::string::npos) << cut;
}

}  // namespace
}  // namespace trainsim
