// How many threads a matrix product through OpenBLAS uses: one, its caller's.
#pragma once

#include <string>

namespace trainsim {

// The executor's workers (and the profiler's measuring threads) are the
// parallelism: a product that spread over the cores would take them from the
// other workers, and OpenBLAS runs the products of several calling threads
// one at a time through its pool. Sets OpenBLAS to run each call on its
// caller's thread; idempotent and thread-safe; build_network calls it.
// Returns the threads a call now uses (1), or 0 without OpenBLAS.
int use_one_blas_thread_per_caller();

// The kernels the matrix products run: OpenBLAS's core ("Haswell",
// "SkylakeX", ...: chosen for the processor at start, or as the environment's
// OPENBLAS_CORETYPE says), or "Eigen" without OpenBLAS.
std::string blas_kernels();

}  // namespace trainsim
