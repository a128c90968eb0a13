// one_rank_per_gpu (tools/options.hpp): when the ranks of an MPI launch may
// sum by NCCL, which refuses two ranks on one GPU. GPUs are numbered per
// host, so the same number on two hosts is two GPUs.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tools/options.hpp"

namespace trainsim {
namespace {

TEST(OneRankPerGpu, TwoRanksOfAHostOnOneGpuShareItAndOfTwoHostsDoNot) {
  EXPECT_TRUE(one_rank_per_gpu({0, 1, 2}, {0, 0, 0}));  // cuda:0,1,2 on one host
  EXPECT_FALSE(one_rank_per_gpu({0, 0}, {0, 0}));       // cuda:0x2 on one host: virtual workers
  EXPECT_TRUE(one_rank_per_gpu({0, 0}, {0, 1}));        // cuda:0x2 over two hosts: GPU 0 of each
  EXPECT_FALSE(one_rank_per_gpu({0, 0, 0, 0}, {0, 0, 1, 1}));
  EXPECT_TRUE(one_rank_per_gpu({0, 1, 0, 1}, {0, 0, 1, 1}));
  EXPECT_TRUE(one_rank_per_gpu({3}, {0}));
  EXPECT_THROW((void)one_rank_per_gpu({0, 1}, {0}), std::logic_error);
}

}  // namespace
}  // namespace trainsim
