// SmallProduct against a product in double: strided operands, overwrite and
// accumulate, rows beyond the product left alone; a batch split in two gives
// the whole batch's rows bit for bit; threads sharing one product; bad sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "exec/tensor/small_product.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

std::vector<float> random_values(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = value(rng);
  return values;
}

struct Shape {
  int64_t m, n, k, lda, ldb, ldc;
};

// The LSTM's two (16 rows by W_hᵀ, 16 rows by W_h inside W = [W_x, W_h]),
// narrow and odd ones, one element.
const std::vector<Shape> kShapes = {
    {16, 512, 128, 64 * 128, 512, 512}, {16, 128, 512, 64 * 512, 256, 128}, {3, 7, 5, 9, 8, 11}, {1, 1, 1, 1, 1, 1},
    {5, 33, 17, 17, 40, 33}};

TEST(SmallProduct, MatchesTheProductInDoubleOnStridedOperands) {
  std::mt19937_64 rng(7);
  for (const Shape& s : kShapes) {
    for (bool accumulate : {false, true}) {
      const auto a = random_values(s.m * s.lda, rng), b = random_values(s.k * s.ldb, rng);
      const auto before = random_values(s.m * s.ldc, rng);
      std::vector<float> c = before;
      const SmallProduct product(s.m, s.n, s.k, s.lda, s.ldb, s.ldc, accumulate);
      product(a.data(), b.data(), c.data());
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.ldc; ++j) {
          const float got = c[i * s.ldc + j];
          if (j >= s.n) {  // between rows: untouched
            ASSERT_EQ(got, before[i * s.ldc + j]) << "m " << s.m << " row " << i << " column " << j;
            continue;
          }
          double expected = accumulate ? before[i * s.ldc + j] : 0.0;
          for (int64_t p = 0; p < s.k; ++p) expected += static_cast<double>(a[i * s.lda + p]) * b[p * s.ldb + j];
          ASSERT_NEAR(got, expected, 1e-5 * (1.0 + std::sqrt(static_cast<double>(s.k))))
              << "m " << s.m << " n " << s.n << " k " << s.k << (accumulate ? " accumulating" : "") << " at " << i
              << ", " << j;
        }
      }
    }
  }
}

TEST(SmallProduct, ABatchSplitInTwoGivesTheWholeBatchsRows) {
  std::mt19937_64 rng(8);
  const int64_t n = 512, k = 128;
  const auto a = random_values(16 * k, rng), b = random_values(k * n, rng);
  std::vector<float> whole(16 * n, 0.0f), halves(16 * n, 0.0f);
  SmallProduct(16, n, k, k, n, n, false)(a.data(), b.data(), whole.data());
  const SmallProduct half(8, n, k, k, n, n, false);
  half(a.data(), b.data(), halves.data());
  half(a.data() + 8 * k, b.data(), halves.data() + 8 * n);
  EXPECT_EQ(whole, halves);
}

TEST(SmallProduct, ThreadsSharingOneProductGetWhatOneThreadGets) {
  std::mt19937_64 rng(9);
  const int64_t m = 16, n = 512, k = 128;
  const auto b = random_values(k * n, rng);
  std::vector<std::vector<float>> inputs, alone, together(4, std::vector<float>(m * n));
  const SmallProduct product(m, n, k, k, n, n, false);
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(random_values(m * k, rng));
    alone.emplace_back(m * n);
    product(inputs[t].data(), b.data(), alone[t].data());
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 50; ++repeat) {
        const SmallProduct own(m, n, k, k, n, n, false);  // dispatched again from each thread
        (repeat % 2 == 0 ? product : own)(inputs[t].data(), b.data(), together[t].data());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(together, alone);
}

// Built with libxsmm, the LSTM's shapes run compiled kernels; built
// without it, Eigen's product (the other tests check its values either way).
TEST(SmallProduct, RunsACompiledKernelExactlyWhereBuiltWithOne) {
  const bool built = SmallProduct::built_with_kernels();
  EXPECT_EQ(SmallProduct(16, 512, 128, 64 * 128, 512, 512, true).compiled(), built);
  EXPECT_EQ(SmallProduct(8, 128, 512, 64 * 512, 256, 128, false).compiled(), built);
  EXPECT_FALSE(SmallProduct(0, 512, 128, 128, 512, 512, false).compiled());  // no rows: nothing to compile
}

TEST(SmallProduct, EmptyProductsOverwriteWithZerosOrLeaveAlone) {
  std::vector<float> c = {3.0f, 4.0f};
  const std::vector<float> a = {1.0f}, b = {1.0f, 1.0f};
  SmallProduct(1, 2, 0, 0, 2, 2, true)(a.data(), b.data(), c.data());
  EXPECT_EQ(c, (std::vector<float>{3.0f, 4.0f}));
  SmallProduct(1, 2, 0, 0, 2, 2, false)(a.data(), b.data(), c.data());
  EXPECT_EQ(c, (std::vector<float>{0.0f, 0.0f}));
  SmallProduct(0, 2, 1, 1, 2, 2, false)(a.data(), b.data(), c.data());  // no rows: nothing read or written
}

TEST(SmallProduct, RefusesStridesShorterThanRows) {
  EXPECT_THROW(SmallProduct(2, 4, 3, 2, 4, 4, false), InternalError);
  EXPECT_THROW(SmallProduct(2, 4, 3, 3, 3, 4, false), InternalError);
  EXPECT_THROW(SmallProduct(2, 4, 3, 3, 4, 3, false), InternalError);
  EXPECT_THROW(SmallProduct(-1, 4, 3, 3, 4, 4, false), InternalError);
}

}  // namespace
}  // namespace trainsim
