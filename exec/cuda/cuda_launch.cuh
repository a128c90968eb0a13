// What the GPU device's kernel files share: the block size, the grid of an
// elementwise loop, and warp reductions. Included by .cu files only.
#pragma once

#include <cstdint>

namespace trainsim::cuda {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Enough blocks to cover n, capped (the loops stride over the rest).
inline unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

// The sum and the largest of `v` over the warp (every lane gets it).
__device__ inline float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One value's momentum-SGD step, as exec/optim's Sgd: g' = g + wd·w, then
// w −= lr·g' where μ is 0 (v unread, may be null), else v = μ·v + g' and
// w −= lr·v.
__device__ inline void sgd_value(float* w, float g, float* v, float lr, float mu, float wd) {
  const float step = g + wd * *w;
  if (mu == 0.0f) {
    *w -= lr * step;
    return;
  }
  *v = mu * *v + step;
  *w -= lr * *v;
}

}  // namespace trainsim::cuda

// A grid-stride loop over 64-bit indices.
#define TRAINSIM_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)
