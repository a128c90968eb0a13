// Calls into the GPU libraries (CUDA's runtime, cuBLAS, cuDNN, NCCL) the
// calling thread has made: each call checked through TRAINSIM_CUDA and its
// kin counts one (a kernel's launch is not a checked call). An op's count
// is the difference around it (ExecOpTiming::library_calls): what its host
// time grows with on a GPU worker.
#pragma once

#include <cstdint>

namespace trainsim {

inline thread_local int64_t library_calls = 0;

}  // namespace trainsim
