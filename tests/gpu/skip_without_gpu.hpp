// The GPU tests' guard: without a GPU (or a build without CUDA) a test
// skips with the reason the CUDA runtime gives, as the issue asks of GPU
// tests on the CPU-only machines; on a GPU machine it runs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "exec/devices.hpp"

#define SKIP_WITHOUT_GPU()                                         \
  do {                                                             \
    std::string skip_reason;                                       \
    if (::trainsim::list_cuda_devices(skip_reason).empty()) {      \
      GTEST_SKIP() << "GPU test skipped: " << skip_reason;         \
    }                                                              \
  } while (false)
