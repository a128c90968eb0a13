// The NCCL transports' refusals, before any GPU is touched: two workers on
// one GPU (NCCL refuses two ranks there), a GPU the driver lacks, or a build
// without CUDA: each an InputError naming --devices, on any machine.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "exec/cuda/nccl_transport.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

TEST(NcclTransport, RefusesTwoWorkersOnOneGpuAndGpusTheDriverLacks) {
  for (const std::vector<int>& gpus : {std::vector<int>{0, 0}, std::vector<int>{0, 1 << 20}, std::vector<int>{-1}}) {
    try {
      make_nccl_transport(gpus);
      ADD_FAILURE() << "no error for " << gpus.size() << " workers on GPUs " << gpus.front() << ", " << gpus.back();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--devices"), std::string::npos) << e.what();
    }
  }
}

// A rank's NCCL member (the MPI launch) checks its GPU when it is made,
// before any communicator.
TEST(NcclTransport, ARanksMemberRefusesAGpuTheDriverLacks) {
  for (const int gpu : {1 << 20, -1}) {
    try {
      (void)make_nccl_rank_member(gpu, 0, 2);
      ADD_FAILURE() << "no error for a rank on GPU " << gpu;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--devices"), std::string::npos) << e.what();
    }
  }
}

// `trainsim devices` names NCCL's version, or why it cannot be opened:
// one or the other, never both.
TEST(NcclLibrary, NamesItsVersionOrWhyItCannotBeOpened) {
  const std::string version = nccl_version_text();
  if (version.empty()) {
    EXPECT_FALSE(nccl_library_error().empty());
    return;
  }
  EXPECT_TRUE(nccl_library_error().empty()) << nccl_library_error();
  EXPECT_TRUE(std::regex_match(version, std::regex(R"(2\.[0-9]+\.[0-9]+)"))) << version;
}

}  // namespace
}  // namespace trainsim
