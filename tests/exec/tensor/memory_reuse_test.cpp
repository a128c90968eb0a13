// The process policies the executor runs under: a freed block of activations
// stays in the process for the next allocation, and a matrix product runs on
// its caller's thread only.
#include "exec/tensor/memory_reuse.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "exec/tensor/blas_threads.hpp"

namespace trainsim {
namespace {

TEST(MemoryReuse, AFreedBlockOfActivationsIsKeptForTheNextOne) {
#if defined(__GLIBC__)
  if (!reuse_freed_memory()) GTEST_SKIP() << "the allocator ignores mallopt (a sanitizer's allocator)";
  constexpr size_t kBytes = size_t{24} << 20;  // far above glibc's default 128 KB threshold
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  const struct mallinfo2 held = mallinfo2();
  if (held.uordblks == before.uordblks && held.hblkhd == before.hblkhd) {
    std::free(block);
    GTEST_SKIP() << "the block came from another allocator than glibc's (a sanitizer's)";
  }
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "the block was mapped on its own, not taken from the heap";
  std::free(block);
  const struct mallinfo2 freed = mallinfo2();
  EXPECT_GE(freed.fordblks, kBytes) << "the freed block went back to the system";
  EXPECT_EQ(freed.arena, held.arena) << "the heap shrank";
  void* again = std::malloc(kBytes);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(mallinfo2().arena, held.arena) << "the second block did not reuse the first's memory";
  std::free(again);
#else
  GTEST_SKIP() << "the policy is glibc's";
#endif
}

TEST(BlasThreads, AProductRunsOnItsCallersThreadOnly) {
#if defined(TRAINSIM_WITH_OPENBLAS)
  EXPECT_EQ(use_one_blas_thread_per_caller(), 1);
  EXPECT_EQ(use_one_blas_thread_per_caller(), 1);  // idempotent
#else
  EXPECT_EQ(use_one_blas_thread_per_caller(), 0);
#endif
}

}  // namespace
}  // namespace trainsim
