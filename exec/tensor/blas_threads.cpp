// use_one_blas_thread_per_caller: OpenBLAS's thread count (see the header).
#include "exec/tensor/blas_threads.hpp"

#include <mutex>

#if defined(TRAINSIM_WITH_OPENBLAS)
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
}
#endif

namespace trainsim {

int use_one_blas_thread_per_caller() {
#if defined(TRAINSIM_WITH_OPENBLAS)
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
  return openblas_get_num_threads();
#else
  return 0;
#endif
}

std::string blas_kernels() {
#if defined(TRAINSIM_WITH_OPENBLAS)
  return openblas_get_corename();
#else
  return "Eigen";
#endif
}

}  // namespace trainsim
