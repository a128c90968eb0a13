// The products every layer calls: cublasSgemm in fp32 (TF32 where the
// handle's math mode allows it), or under CudaPrecision::bf16 each operand
// rounded to bfloat16 on the stream and multiplied by cublasGemmEx with fp32
// sums and result. (CUBLAS_COMPUTE_32F_FAST_16BF on fp32 operands would let
// cuBLAS choose TF32 instead, which it does on Hopper.)
#include <algorithm>

#include "exec/cuda/cuda_layer.hpp"

namespace trainsim::cuda {
namespace {

int as_int(int64_t v) { return static_cast<int>(v); }

// The values a column-major operand of rows x cols (as stored: transposed
// where `t` says) spans from its first, ld apart per column.
int64_t extent(cublasOperation_t t, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t stored_rows = t == CUBLAS_OP_N ? rows : cols, stored_cols = t == CUBLAS_OP_N ? cols : rows;
  return stored_rows <= 0 || stored_cols <= 0 ? 0 : ld * (stored_cols - 1) + stored_rows;
}

// Room for n bfloat16 values on c's stream: the newest array where it holds
// them, else a new one of at least twice its size (the old ones stay: work
// queued or captured before may still read them).
uint16_t* bf16_room(const Context& c, int64_t n) {
  std::vector<DeviceArray<uint16_t>>& arrays = *c.bf16_operands;
  if (arrays.empty() || arrays.back().size() < n) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TRAINSIM_CUDA(cudaStreamIsCapturing(c.stream, &capturing));
    TRAINSIM_CHECK(capturing == cudaStreamCaptureStatusNone,
                   "a bf16 product larger in a captured pass than in the pass before it");
    arrays.emplace_back(std::max(n, 2 * (arrays.empty() ? int64_t{0} : arrays.back().size())));
  }
  return arrays.back().get();
}

// a and b rounded to bfloat16 into one array (b from a 128-byte boundary);
// where each starts.
std::pair<const uint16_t*, const uint16_t*> rounded(const Context& c, const float* a, int64_t na, const float* b,
                                                    int64_t nb) {
  const int64_t at = (na + 63) / 64 * 64;
  uint16_t* room = bf16_room(c, at + nb);
  round_to_bf16(a, room, na, c.stream);
  round_to_bf16(b, room + at, nb, c.stream);
  return {room, room + at};
}

}  // namespace

void gemm(const Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, const float* beta, float* out, int64_t ldc) {
  if (!c.bf16) {
    TRAINSIM_CUBLAS(cublasSgemm(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a, as_int(lda), b, as_int(ldb),
                                beta, out, as_int(ldc)));
    return;
  }
  const auto [a16, b16] = rounded(c, a, extent(ta, m, k, lda), b, extent(tb, k, n, ldb));
  TRAINSIM_CUBLAS(cublasGemmEx(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a16, CUDA_R_16BF, as_int(lda),
                               b16, CUDA_R_16BF, as_int(ldb), beta, out, CUDA_R_32F, as_int(ldc), CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
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
  const auto spans = [batch](int64_t one, int64_t stride) {
    return one == 0 || batch <= 0 ? 0 : stride * (batch - 1) + one;
  };
  const auto [a16, b16] =
      rounded(c, a.data, spans(extent(ta, m, k, a.ld), a.stride), b.data, spans(extent(tb, k, n, b.ld), b.stride));
  TRAINSIM_CUBLAS(cublasGemmStridedBatchedEx(c.blas, ta, tb, as_int(m), as_int(n), as_int(k), &kOne, a16, CUDA_R_16BF,
                                             as_int(a.ld), a.stride, b16, CUDA_R_16BF, as_int(b.ld), b.stride, &kZero,
                                             out, CUDA_R_32F, as_int(ldc), stride_out, as_int(batch),
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace trainsim::cuda
