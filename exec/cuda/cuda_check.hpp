// Checks of CUDA runtime, cuBLAS and cuDNN return codes: a failure throws
// CudaError naming the call, where it was made and the library's message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace trainsim {

// A CUDA library call failed (out of device memory, a lost device, a bad launch).
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line);

}  // namespace trainsim

#define TRAINSIM_CUDA(call) ::trainsim::check_cuda((call), #call, __FILE__, __LINE__)
#define TRAINSIM_CUBLAS(call) ::trainsim::check_cublas((call), #call, __FILE__, __LINE__)
#define TRAINSIM_CUDNN(call) ::trainsim::check_cudnn((call), #call, __FILE__, __LINE__)
