// Products of a few rows by a matrix that stays the same from call to call:
// an LSTM's recurrent product at each time step (the batch's rows by W_h).
#pragma once

#include <cstdint>

namespace trainsim {

// C = A·B, or C += A·B, for one shape: A m×k, B k×n, C m×n, all row-major
// with the given row strides. Built with libxsmm (TRAINSIM_WITH_LIBXSMM), it
// runs a kernel compiled for the shape and the processor at construction,
// which reads B where it lies: a BLAS packs B again at every call, which for
// 16 rows by a 128×512 matrix took longer than the product itself. Without
// libxsmm, or where it has no kernel for the shape, the product runs through
// Eigen (and its BLAS). A compiled kernel's row of C does not depend on the
// other rows of A, so a batch split in parts gives the rows the whole batch
// gives. Calls are thread-safe.
class SmallProduct {
 public:
  SmallProduct(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc, bool accumulate);

  void operator()(const float* a, const float* b, float* c) const;

  // Whether a compiled kernel runs the product (false: Eigen's).
  bool compiled() const { return kernel_ != nullptr; }

  // Whether this build has libxsmm's kernels.
  static bool built_with_kernels();

 private:
  int64_t m_, n_, k_, lda_, ldb_, ldc_;
  bool accumulate_;
  using Kernel = void (*)();  // libxsmm_smmfunction, kept opaque here
  Kernel kernel_ = nullptr;
  bool clear_upper_ = false;  // the kernel uses AVX registers: vzeroupper after it
};

}  // namespace trainsim
