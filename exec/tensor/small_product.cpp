// SmallProduct: libxsmm's JIT kernel for the shape, or Eigen's product.
#include "exec/tensor/small_product.hpp"

#include <algorithm>
#include <limits>

#include "exec/tensor/tensor.hpp"
#include "model/error.hpp"

#if defined(TRAINSIM_WITH_LIBXSMM)
#include <libxsmm.h>
#endif

namespace trainsim {
namespace {

using StridedView = Eigen::Map<RowMajorMatrix, 0, Eigen::OuterStride<>>;
using ConstStridedView = Eigen::Map<const RowMajorMatrix, 0, Eigen::OuterStride<>>;

}  // namespace

SmallProduct::SmallProduct(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, bool accumulate)
    : m_(m), n_(n), k_(k), lda_(lda), ldb_(ldb), ldc_(ldc), accumulate_(accumulate) {
  TRAINSIM_CHECK(m >= 0 && n >= 0 && k >= 0 && lda >= k && ldb >= n && ldc >= n,
                 "small product: sizes must be non-negative and each row stride at least its row");
#if defined(TRAINSIM_WITH_LIBXSMM)
  const int64_t largest = std::max({m, n, k, lda, ldb, ldc});
  if (m == 0 || n == 0 || k == 0 || largest > std::numeric_limits<libxsmm_blasint>::max()) return;
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: libxsmm's (column-major)
  // product of an n×k matrix (B's storage) by a k×m one (A's storage).
  const libxsmm_blasint mm = n, nn = m, kk = k, la = ldb, lb = lda, lc = ldc;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const libxsmm_smmfunction kernel = libxsmm_smmdispatch(mm, nn, kk, &la, &lb, &lc, &alpha, &beta, nullptr, nullptr);
  kernel_ = reinterpret_cast<Kernel>(kernel);
  clear_upper_ = kernel != nullptr && libxsmm_get_target_archid() >= LIBXSMM_X86_AVX;
#endif
}

bool SmallProduct::built_with_kernels() {
#if defined(TRAINSIM_WITH_LIBXSMM)
  return true;
#else
  return false;
#endif
}

void SmallProduct::operator()(const float* a, const float* b, float* c) const {
#if defined(TRAINSIM_WITH_LIBXSMM)
  if (kernel_ != nullptr) {
    reinterpret_cast<libxsmm_smmfunction>(kernel_)(b, a, c);
    // The kernel leaves the vector registers' upper halves set; the SSE code
    // after it (the default build's) then runs several times slower until
    // they are cleared.
    if (clear_upper_) asm volatile("vzeroupper" ::: "memory");
    return;
  }
#endif
  if (m_ == 0 || n_ == 0) return;
  StridedView out(c, m_, n_, Eigen::OuterStride<>(ldc_));
  const ConstStridedView left(a, m_, k_, Eigen::OuterStride<>(lda_)), right(b, k_, n_, Eigen::OuterStride<>(ldb_));
  if (accumulate_) {
    out.noalias() += left * right;
  } else {
    out.noalias() = left * right;
  }
}

}  // namespace trainsim
