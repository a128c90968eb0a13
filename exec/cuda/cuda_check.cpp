// The messages of cuda_check.hpp's checks.
#include "exec/cuda/cuda_check.hpp"

#include "exec/library_calls.hpp"

namespace trainsim {
namespace {

[[noreturn]] void fail(const char* call, const char* file, int line, const std::string& message) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + message);
}

}  // namespace

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  ++library_calls;
  if (status != cudaSuccess) fail(call, file, line, cudaGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  ++library_calls;
  if (status != CUBLAS_STATUS_SUCCESS) fail(call, file, line, cublasGetStatusString(status));
}

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  ++library_calls;
  if (status != CUDNN_STATUS_SUCCESS) fail(call, file, line, cudnnGetErrorString(status));
}

}  // namespace trainsim
