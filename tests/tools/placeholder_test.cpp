#include <gtest/gtest.h>
TEST(Cli, Builds) { EXPECT_TRUE(true); }
