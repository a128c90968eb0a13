// OpenedPaths: the directions a library member opens for arrays passed
// between the ranks' devices, alike on every rank.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "exec/transport/library_member.hpp"

namespace trainsim {
namespace {

using Directions = std::vector<std::pair<int, int>>;

TEST(OpenedPaths, EachDirectionIsNewOnceInTheListsOrder) {
  OpenedPaths paths;
  const Directions first = {{0, 1}, {1, 0}, {0, 1}, {2, 2}, {1, 2}};
  EXPECT_EQ(paths.fresh(first), (Directions{{0, 1}, {1, 0}, {1, 2}}));  // once each, none to itself
  EXPECT_TRUE(paths.fresh(first).empty());                              // a second stretch of the run
  EXPECT_EQ(paths.fresh(Directions{{2, 1}, {0, 1}}), (Directions{{2, 1}}));
}

}  // namespace
}  // namespace trainsim
