// cuBLAS is opened on first use, not linked (exec/cuda/cublas_on_demand.cpp):
// the entry points the project calls reach the real library, which needs no
// GPU to be opened or to name a status. The tool itself does not list
// libcublas among what it loads at start (tests/CMakeLists.txt,
// tool_does_not_link_cublas).
#include <gtest/gtest.h>

#include <string>

#ifdef TRAINSIM_WITH_CUDA
#include <cublas_v2.h>
#endif

namespace {

TEST(CublasOnDemand, StatusStringsComeFromTheLibraryOpenedOnFirstUse) {
#ifndef TRAINSIM_WITH_CUDA
  GTEST_SKIP() << "built without CUDA: no cuBLAS";
#else
  const std::string success = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  const std::string failed = cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(success.find("could not be loaded"), std::string::npos) << success;
  EXPECT_FALSE(success.empty());
  EXPECT_NE(success, failed);  // the library's own text per status, not the loader's one message
#endif
}

}  // namespace
