// The platform-independent draws: checked against the one output of
// std::mt19937_64 the C++ standard fixes ([rand.predef]: the 10000th output of
// a default-constructed engine is 9981545732273789042).
#include "exec/data/random_bits.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace trainsim {
namespace {

std::mt19937_64 engine_before_its_10000th_output() {
  std::mt19937_64 rng;
  rng.discard(9999);
  return rng;
}

TEST(RandomBits, UniformUnitKeepsTheTop53Bits) {
  std::mt19937_64 rng = engine_before_its_10000th_output();
  // (9981545732273789042 >> 11) · 2^-53 = 4873801627086811 / 2^53 = 0.5411006783847329.
  EXPECT_DOUBLE_EQ(uniform_unit(rng), 4873801627086811.0 / 9007199254740992.0);
}

TEST(RandomBits, UniformBelowIsTheResidueOfAnAcceptedDraw) {
  std::mt19937_64 rng = engine_before_its_10000th_output();
  // 2^64 mod 10 = 6, so a draw >= 6 is accepted: 9981545732273789042 mod 10 = 2.
  EXPECT_EQ(uniform_below(rng, 10), 2u);
}

TEST(RandomBits, UniformBelowStaysInRangeAndHitsEveryValue) {
  std::mt19937_64 rng(7);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = uniform_below(rng, 7);
    ASSERT_LT(v, 7u);
    ++hits[v];
  }
  // 1000 expected each; binomial std ≈ 29, so 800..1200 is beyond 6 std.
  for (int h : hits) EXPECT_TRUE(h > 800 && h < 1200) << h;
}

TEST(RandomBits, MixSeedSeparatesStreamsAndSeeds) {
  EXPECT_EQ(mix_seed(1, 2), mix_seed(1, 2));
  EXPECT_NE(mix_seed(1, 2), mix_seed(1, 3));
  EXPECT_NE(mix_seed(1, 2), mix_seed(2, 2));
  EXPECT_NE(mix_seed(0, 0), 0u);
}

}  // namespace
}  // namespace trainsim
