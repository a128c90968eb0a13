// The GPU device's own kernels (cuda_kernels.hpp): elementwise, pooling,
// the loss and the optimizer. Grid-stride loops over 64-bit indices.
#include <cfloat>

#include "exec/cuda/cuda_kernels.hpp"

namespace trainsim::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to cover n, capped (the loops stride over the rest).
unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

#define TRAINSIM_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

__global__ void add_row_bias_kernel(float* y, const float* bias, int64_t rows, int64_t width) {
  TRAINSIM_GRID_LOOP(i, rows * width) { y[i] += bias[i % width]; }
}

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  TRAINSIM_GRID_LOOP(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  TRAINSIM_GRID_LOOP(i, n) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
}

__global__ void maxpool_forward_kernel(const float* x, float* y, int32_t* argmax, PoolGeometry g) {
  const int64_t out_plane = g.out_height * g.out_width;
  TRAINSIM_GRID_LOOP(i, g.planes * out_plane) {
    const int64_t p = i / out_plane, o = i % out_plane;
    const int64_t oh = o / g.out_width, ow = o % g.out_width;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    const int64_t h_begin = h0 < 0 ? 0 : h0, w_begin = w0 < 0 ? 0 : w0;
    const int64_t h_end = h0 + g.kernel_h < g.height ? h0 + g.kernel_h : g.height;
    const int64_t w_end = w0 + g.kernel_w < g.width ? w0 + g.kernel_w : g.width;
    const int64_t base = p * g.height * g.width;
    float best = -FLT_MAX;
    int64_t best_index = -1;
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t w = w_begin; w < w_end; ++w) {
        const int64_t index = base + h * g.width + w;
        if (best_index < 0 || x[index] > best) best = x[index], best_index = index;
      }
    }
    y[i] = best;
    argmax[i] = static_cast<int32_t>(best_index);
  }
}

__global__ void maxpool_backward_kernel(const float* dy, const int32_t* argmax, float* dx, int64_t n) {
  TRAINSIM_GRID_LOOP(i, n) { atomicAdd(dx + argmax[i], dy[i]); }
}

// One warp per position: the max, the sum of exponentials, then the gradient.
__global__ void softmax_cross_entropy_kernel(const float* logits, const int32_t* labels, int64_t positions,
                                             int64_t classes, float* loss, float* dlogits) {
  const int64_t warps = int64_t{blockDim.x} / 32 * gridDim.x;
  const int lane = threadIdx.x % 32;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; r < positions; r += warps) {
    const float* z = logits + r * classes;
    float max_z = -FLT_MAX;
    for (int64_t j = lane; j < classes; j += 32) max_z = fmaxf(max_z, z[j]);
    for (int offset = 16; offset > 0; offset /= 2) max_z = fmaxf(max_z, __shfl_xor_sync(0xffffffffu, max_z, offset));
    float sum_exp = 0.0f;
    for (int64_t j = lane; j < classes; j += 32) sum_exp += expf(z[j] - max_z);
    for (int offset = 16; offset > 0; offset /= 2) sum_exp += __shfl_xor_sync(0xffffffffu, sum_exp, offset);
    const int32_t label = labels[r];
    if (lane == 0) loss[r] = logf(sum_exp) + max_z - z[label];
    const float scale = 1.0f / static_cast<float>(positions);
    float* dz = dlogits + r * classes;
    for (int64_t j = lane; j < classes; j += 32) {
      dz[j] = (expf(z[j] - max_z) / sum_exp - (j == label ? 1.0f : 0.0f)) * scale;
    }
  }
}

__global__ void sgd_step_kernel(float* w, const float* g, float* v, int64_t n, float lr, float mu, float wd) {
  TRAINSIM_GRID_LOOP(i, n) {
    const float step = g[i] + wd * w[i];
    if (mu == 0.0f) {
      w[i] -= lr * step;
    } else {
      v[i] = mu * v[i] + step;
      w[i] -= lr * v[i];
    }
  }
}

}  // namespace

void add_row_bias(float* y, const float* bias, int64_t rows, int64_t width, cudaStream_t stream) {
  if (rows * width > 0) add_row_bias_kernel<<<blocks_for(rows * width), kThreads, 0, stream>>>(y, bias, rows, width);
}

void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  if (n > 0) relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
}

void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (n > 0) maxpool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, argmax, g);
}

void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolGeometry& g,
                      cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  cudaMemsetAsync(dx, 0, sizeof(float) * static_cast<size_t>(g.planes * g.height * g.width), stream);
  if (n > 0) maxpool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, argmax, dx, n);
}

void softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t positions, int64_t classes,
                           float* loss, float* dlogits, cudaStream_t stream) {
  if (positions > 0) {
    softmax_cross_entropy_kernel<<<blocks_for(positions * 32), kThreads, 0, stream>>>(logits, labels, positions,
                                                                                     classes, loss, dlogits);
  }
}

void sgd_step(float* w, const float* g, float* v, int64_t n, float learning_rate, float momentum,
              float weight_decay, cudaStream_t stream) {
  if (n > 0) {
    sgd_step_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, v, n, learning_rate, momentum, weight_decay);
  }
}

}  // namespace trainsim::cuda
