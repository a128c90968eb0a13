// The products every layer calls: cublasSgemm in fp32, or under
// CudaPrecision::bf16 cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF (the
// same fp32 operands and result; cuBLAS rounds the inputs to bfloat16 for
// the tensor cores and sums in fp32).
#include "exec/cuda/cuda_layer.hpp"

namespace trainsim::cuda {
namespace {

int as_int(int64_t v) { return static_cast<int>(v); }

}  // namespace

void gemm(const Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, const float* beta, float* out, int64_t ldc) {
  if (!c.bf16) {
    TRAINSIM_CUBLAS(cublasSgemm(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a, as_int(lda), b, as_int(ldb),
                                beta, out, as_int(ldc)));
    return;
  }
  TRAINSIM_CUBLAS(cublasGemmEx(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a, CUDA_R_32F, as_int(lda), b,
                               CUDA_R_32F, as_int(ldb), beta, out, CUDA_R_32F, as_int(ldc),
                               CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched(const Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                          StridedOperand a, StridedOperand b, float* out, int64_t ldc, int64_t stride_out,
                          int64_t batch) {
  if (!c.bf16) {
    TRAINSIM_CUBLAS(cublasSgemmStridedBatched(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a.data,
                                              as_int(a.ld), a.stride, b.data, as_int(b.ld), b.stride, &kZero, out,
                                              as_int(ldc), stride_out, as_int(batch)));
    return;
  }
  TRAINSIM_CUBLAS(cublasGemmStridedBatchedEx(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a.data, CUDA_R_32F,
                                             as_int(a.ld), a.stride, b.data, CUDA_R_32F, as_int(b.ld), b.stride, &kZero,
                                             out, CUDA_R_32F, as_int(ldc), stride_out, as_int(batch),
                                             CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
}

}  // namespace trainsim::cuda
