// cuBLAS loaded when first called, not when trainsim starts. Linking
// libcublas makes every run of the tool (`--help` included) map and relocate
// cuBLAS and cuBLASLt, about 600 MB of libraries: 0.09 s and 220 MB of memory
// before main, on machines with or without a GPU. These are the cuBLAS entry
// points the project calls (cublas_v2.h names them), each forwarding to the
// library opened with dlopen on first use. Where it cannot be opened they
// return CUBLAS_STATUS_NOT_INITIALIZED, and cublasGetStatusString says why.
#include <cublas_v2.h>

#include <string>

#include "exec/library_on_demand.hpp"

namespace {

const trainsim::LibraryOnDemand& library() {
  static const trainsim::LibraryOnDemand loaded("cuBLAS", "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  return loaded;
}

template <typename F>
F* resolve(const char* name) {
  return library().resolve<F>(name);
}

}  // namespace

#define TRAINSIM_CUBLAS_FORWARD(function, params, args)                          \
  cublasStatus_t CUBLASWINAPI function params {                                  \
    static auto* const target = resolve<decltype(function)>(#function);          \
    return target != nullptr ? target args : CUBLAS_STATUS_NOT_INITIALIZED;     \
  }

// The same for an entry point cublas_api.h also overloads in C++ (the Ex
// products take a cudaDataType compute type there), typed by its parameters.
#define TRAINSIM_CUBLAS_FORWARD_C(function, params, args)                   \
  cublasStatus_t CUBLASWINAPI function params {                             \
    using Entry = cublasStatus_t CUBLASWINAPI params;                       \
    static auto* const target = resolve<Entry>(#function);                  \
    return target != nullptr ? target args : CUBLAS_STATUS_NOT_INITIALIZED; \
  }

extern "C" {

TRAINSIM_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
TRAINSIM_CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t handle), (handle))
TRAINSIM_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
TRAINSIM_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
TRAINSIM_CUBLAS_FORWARD(cublasSetWorkspace_v2, (cublasHandle_t handle, void* workspace, size_t bytes),
                        (handle, workspace, bytes))
TRAINSIM_CUBLAS_FORWARD(cublasSgemv_v2,
                        (cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float* alpha,
                         const float* a, int lda, const float* x, int incx, const float* beta, float* y, int incy),
                        (handle, trans, m, n, alpha, a, lda, x, incx, beta, y, incy))
TRAINSIM_CUBLAS_FORWARD(cublasSgemm_v2,
                        (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                         int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                         const float* beta, float* c, int ldc),
                        (handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
TRAINSIM_CUBLAS_FORWARD(cublasSgemmStridedBatched,
                        (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                         int k, const float* alpha, const float* a, int lda, long long int stride_a, const float* b,
                         int ldb, long long int stride_b, const float* beta, float* c, int ldc,
                         long long int stride_c, int batch_count),
                        (handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                         stride_c, batch_count))

TRAINSIM_CUBLAS_FORWARD_C(cublasGemmEx,
                          (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                           cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                           cublasComputeType_t compute_type, cublasGemmAlgo_t algo),
                          (handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc,
                           compute_type, algo))
TRAINSIM_CUBLAS_FORWARD_C(cublasGemmStridedBatchedEx,
                          (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const void* alpha, const void* a, cudaDataType a_type, int lda,
                           long long int stride_a, const void* b, cudaDataType b_type, int ldb, long long int stride_b,
                           const void* beta, void* c, cudaDataType c_type, int ldc, long long int stride_c,
                           int batch_count, cublasComputeType_t compute_type, cublasGemmAlgo_t algo),
                          (handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b,
                           beta, c, c_type, ldc, stride_c, batch_count, compute_type, algo))

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static auto* const target = resolve<decltype(cublasGetStatusString)>("cublasGetStatusString");
  if (target != nullptr) return target(status);
  return library().error.empty() ? "cuBLAS has no cublasGetStatusString" : library().error.c_str();
}

}  // extern "C"
