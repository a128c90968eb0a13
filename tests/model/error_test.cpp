// InputError's one short line and InternalError's message without its source
// location.
#include "model/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace trainsim {
namespace {

TEST(InputError, JoinsWhereWhatAndExpectedIntoOneLine) {
  const InputError e("p.json: layers[3].forward_s", "is -1", "a time >= 0 s");
  EXPECT_STREQ(e.what(), "p.json: layers[3].forward_s: is -1 (a time >= 0 s)");
}

TEST(InputError, AnEchoedHugeValueGivesAShortLine) {
  const InputError e("--model", "'" + std::string(50'000'000, 'x') + "' is no zoo model", "one of vgg16, ...");
  EXPECT_LT(std::string(e.what()).size(), 400u);
  EXPECT_NE(std::string(e.what()).find("(50000018 bytes)"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
}

TEST(InternalError, SaysTheMessageAndKeepsTheLocationApart) {
  try {
    TRAINSIM_CHECK(1 + 1 == 3, "a device is busier than the iteration");
    ADD_FAILURE() << "no InternalError";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "a device is busier than the iteration");
    EXPECT_NE(e.location().find("error_test.cpp:"), std::string::npos) << e.location();
  }
}

}  // namespace
}  // namespace trainsim
