// one_rank_per_gpu (tools/options.hpp): when the ranks of an MPI launch may
// sum by NCCL, which refuses two ranks on one GPU. GPUs are numbered per
// host, so the same number on two hosts is two GPUs. And gpu_worker_budget:
// what each worker sharing a GPU may hold of it.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/devices.hpp"
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

// gpu_worker_budget: a W-th of the GPU's memory for each of W virtual
// workers on it, or of the ranks of one host sharing it (none where the
// driver reports no such GPU); no limit, only counting, for a worker alone
// on a GPU or with a GPU each.
TEST(GpuWorkerBudget, EachOfWWorkersSharingAGpuGetsAWthOfItsMemory) {
  std::string reason;
  double memory = 0;
  for (const LocalDevice& d : list_cuda_devices(reason)) memory = d.id == "cuda:0" ? d.memory_bytes : memory;
  const std::shared_ptr<MemoryBudget> shared = gpu_worker_budget(GpuDevice{0, 4, {}}, 2);
  EXPECT_EQ(shared->limit(), memory > 0 ? static_cast<int64_t>(memory) / 4 : -1);
  EXPECT_EQ(gpu_worker_budget(GpuDevice{0, 4, {}}, 2, 2)->limit(), memory > 0 ? static_cast<int64_t>(memory) / 2 : -1);
  EXPECT_EQ(gpu_worker_budget(GpuDevice{0, 4, {}}, 2, 1)->limit(), -1);  // ranks of other hosts: alone on its GPU
  EXPECT_EQ(gpu_worker_budget(GpuDevice{0, 1, {}}, 0)->limit(), -1);
  EXPECT_EQ(gpu_worker_budget(GpuDevice{0, 2, {0, 1}}, 1)->limit(), -1);
  if (shared->limit() < 0) GTEST_SKIP() << "no GPU 0 here (" << reason << "): the limit itself is not checked";
  try {
    shared->charge(shared->limit() + 1);
    FAIL() << "a charge past a quarter of the GPU";
  } catch (const MemoryBudgetExceeded& e) {
    EXPECT_NE(e.problem().find("worker 2, one of 4 sharing cuda:0 would hold"), std::string::npos) << e.problem();
    EXPECT_NE(e.expected().find("1/4 of cuda:0's"), std::string::npos) << e.expected();
  }
}

}  // namespace
}  // namespace trainsim
