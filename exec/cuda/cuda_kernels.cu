// The GPU device's own kernels (cuda_kernels.hpp): elementwise, pooling,
// the loss and the optimizer. Grid-stride loops over 64-bit indices.
#include <cuda_bf16.h>

#include <cfloat>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/cuda_launch.cuh"

namespace trainsim::cuda {
namespace {

__global__ void add_row_bias_kernel(float* y, const float* bias, int64_t rows, int64_t width) {
  TRAINSIM_GRID_LOOP(i, rows * width) { y[i] += bias[i % width]; }
}

// Samples per block of add_channel_sums: each block sums one channel over
// this many samples and adds its partial sum atomically.
constexpr int64_t kSamplesPerBlock = 16;

__global__ void add_channel_sums_kernel(const float* dy, float* db, int64_t batch, int64_t channels,
                                        int64_t plane) {
  const int64_t c = blockIdx.x;
  const int64_t first = int64_t{blockIdx.y} * kSamplesPerBlock;
  const int64_t last = first + kSamplesPerBlock < batch ? first + kSamplesPerBlock : batch;
  float sum = 0.0f;
  for (int64_t n = first; n < last; ++n) {
    const float* row = dy + (n * channels + c) * plane;
    for (int64_t p = threadIdx.x; p < plane; p += blockDim.x) sum += row[p];
  }
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(db + c, partial[0]);
}

__device__ float relu(float v) { return v > 0.0f ? v : 0.0f; }
__device__ float pass_if(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

// Four floats at a time (`quads` of them) where every buffer is 16-byte
// aligned (cudaMalloc's are), then one at a time for the rest.
__global__ void relu_forward_kernel(const float* x, float* y, int64_t n, int64_t quads) {
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  TRAINSIM_GRID_LOOP(i, quads) {
    const float4 v = x4[i];
    y4[i] = make_float4(relu(v.x), relu(v.y), relu(v.z), relu(v.w));
  }
  TRAINSIM_GRID_LOOP(i, n - 4 * quads) { y[4 * quads + i] = relu(x[4 * quads + i]); }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n, int64_t quads,
                                     float keep) {
  const float4* y4 = reinterpret_cast<const float4*>(y);
  const float4* dy4 = reinterpret_cast<const float4*>(dy);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  TRAINSIM_GRID_LOOP(i, quads) {
    const float4 a = y4[i], b = dy4[i];
    const float4 old = keep != 0.0f ? dx4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    dx4[i] = make_float4(old.x + pass_if(a.x, b.x), old.y + pass_if(a.y, b.y), old.z + pass_if(a.z, b.z),
                         old.w + pass_if(a.w, b.w));
  }
  TRAINSIM_GRID_LOOP(i, n - 4 * quads) {
    const int64_t j = 4 * quads + i;
    dx[j] = (keep != 0.0f ? dx[j] : 0.0f) + pass_if(y[j], dy[j]);
  }
}

__device__ float4 operator+(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n, int64_t quads) {
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  TRAINSIM_GRID_LOOP(i, quads) { y4[i] = a4[i] + b4[i]; }
  TRAINSIM_GRID_LOOP(i, n - 4 * quads) { y[4 * quads + i] = a[4 * quads + i] + b[4 * quads + i]; }
}

__global__ void pass_gradient_kernel(const float* dy, float* dx, int64_t n, int64_t quads) {
  const float4* dy4 = reinterpret_cast<const float4*>(dy);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  TRAINSIM_GRID_LOOP(i, quads) { dx4[i] = dx4[i] + dy4[i]; }
  TRAINSIM_GRID_LOOP(i, n - 4 * quads) { dx[4 * quads + i] += dy[4 * quads + i]; }
}

// One warp per plane.
__global__ void global_avgpool_forward_kernel(const float* x, float* y, int64_t planes, int64_t plane) {
  const int64_t warps = int64_t{blockDim.x} / 32 * gridDim.x;
  const int lane = threadIdx.x % 32;
  for (int64_t p = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; p < planes; p += warps) {
    float sum = 0.0f;
    for (int64_t i = lane; i < plane; i += 32) sum += x[p * plane + i];
    sum = warp_sum(sum);
    if (lane == 0) y[p] = sum / static_cast<float>(plane);
  }
}

__global__ void global_avgpool_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t plane,
                                               float keep) {
  TRAINSIM_GRID_LOOP(i, planes * plane) {
    dx[i] = (keep != 0.0f ? dx[i] : 0.0f) + dy[i / plane] / static_cast<float>(plane);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }


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
                                             int64_t classes, float* loss, float* dlogits, float grad_scale) {
  const int64_t warps = int64_t{blockDim.x} / 32 * gridDim.x;
  const int lane = threadIdx.x % 32;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; r < positions; r += warps) {
    const float* z = logits + r * classes;
    float max_z = -FLT_MAX;
    for (int64_t j = lane; j < classes; j += 32) max_z = fmaxf(max_z, z[j]);
    max_z = warp_max(max_z);
    float sum_exp = 0.0f;
    for (int64_t j = lane; j < classes; j += 32) sum_exp += expf(z[j] - max_z);
    sum_exp = warp_sum(sum_exp);
    const int32_t label = labels[r];
    if (lane == 0) loss[r] = logf(sum_exp) + max_z - z[label];
    const float scale = grad_scale / static_cast<float>(positions);
    float* dz = dlogits + r * classes;
    for (int64_t j = lane; j < classes; j += 32) {
      dz[j] = (expf(z[j] - max_z) / sum_exp - (j == label ? 1.0f : 0.0f)) * scale;
    }
  }
}

// Up to kSgdTensorsPerLaunch parameters of one launch: block b steps the
// parameter t with first_block[t] <= b < first_block[t + 1], its blocks
// striding over its values.
struct SgdLaunch {
  float* w[kSgdTensorsPerLaunch];
  float* g[kSgdTensorsPerLaunch];
  float* v[kSgdTensorsPerLaunch];
  int64_t n[kSgdTensorsPerLaunch];
  int64_t first_block[kSgdTensorsPerLaunch + 1];
  int count;
};

__global__ void sgd_step_all_kernel(SgdLaunch launch, float lr, float mu, float wd, bool zero_gradients) {
  int t = 0;
  while (t + 1 < launch.count && int64_t{blockIdx.x} >= launch.first_block[t + 1]) ++t;
  const int64_t block = int64_t{blockIdx.x} - launch.first_block[t];
  const int64_t blocks = launch.first_block[t + 1] - launch.first_block[t];
  float* w = launch.w[t];
  float* g = launch.g[t];
  float* v = launch.v[t];
  for (int64_t i = block * blockDim.x + threadIdx.x; i < launch.n[t]; i += blocks * blockDim.x) {
    sgd_value(w + i, g[i], v == nullptr ? nullptr : v + i, lr, mu, wd);
    if (zero_gradients) g[i] = 0.0f;
  }
}

__global__ void sgd_step_rows_kernel(float* __restrict__ w, float* __restrict__ v, const int64_t* __restrict__ rows,
                                     const float* __restrict__ values, int64_t count, int64_t width, float lr, float mu,
                                     float wd) {
  TRAINSIM_GRID_LOOP(i, count * width) {
    const int64_t at = rows[i / width] * width + i % width;  // the rows are distinct: no two threads share one
    sgd_value(w + at, 0.0f + values[i], v == nullptr ? nullptr : v + at, lr, mu, wd);
  }
}

__global__ void spectrain_smooth_kernel(float* v, const float* g, int64_t n, float gamma, float rest) {
  TRAINSIM_GRID_LOOP(i, n) { v[i] = gamma * v[i] + rest * g[i]; }
}

__global__ void spectrain_predict_kernel(float* out, const float* w, const float* v, int64_t n, float step) {
  TRAINSIM_GRID_LOOP(i, n) { out[i] = w[i] - step * v[i]; }
}

__global__ void scale_values_kernel(float* x, int64_t n, float scale) {
  TRAINSIM_GRID_LOOP(i, n) { x[i] *= scale; }
}

__global__ void add_scaled_kernel(float* sum, const float* values, int64_t n, float scale) {
  TRAINSIM_GRID_LOOP(i, n) { sum[i] = values == nullptr ? sum[i] * scale : (sum[i] + values[i]) * scale; }
}

__global__ void round_to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  TRAINSIM_GRID_LOOP(i, n) { y[i] = __float2bfloat16_rn(x[i]); }
}

}  // namespace

void add_row_bias(float* y, const float* bias, int64_t rows, int64_t width, cudaStream_t stream) {
  if (rows * width > 0) add_row_bias_kernel<<<blocks_for(rows * width), kThreads, 0, stream>>>(y, bias, rows, width);
}

void add_channel_sums(const float* dy, float* db, int64_t batch, int64_t channels, int64_t plane,
                      cudaStream_t stream) {
  if (batch * channels * plane == 0) return;
  const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>((batch + kSamplesPerBlock - 1) / kSamplesPerBlock));
  add_channel_sums_kernel<<<grid, kThreads, 0, stream>>>(dy, db, batch, channels, plane);
}

void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int64_t quads = aligned16(x) && aligned16(y) ? n / 4 : 0;
  if (n > 0) relu_forward_kernel<<<blocks_for(n - 3 * quads), kThreads, 0, stream>>>(x, y, n, quads);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream) {
  const int64_t quads = aligned16(y) && aligned16(dy) && aligned16(dx) ? n / 4 : 0;
  if (n > 0) {
    relu_backward_kernel<<<blocks_for(n - 3 * quads), kThreads, 0, stream>>>(y, dy, dx, n, quads,
                                                                           accumulate ? 1.0f : 0.0f);
  }
}

void add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  const int64_t quads = aligned16(a) && aligned16(b) && aligned16(y) ? n / 4 : 0;
  if (n > 0) add_kernel<<<blocks_for(n - 3 * quads), kThreads, 0, stream>>>(a, b, y, n, quads);
}

void pass_gradient(const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream) {
  if (n <= 0) return;
  if (accumulate) {
    const int64_t quads = aligned16(dy) && aligned16(dx) ? n / 4 : 0;
    pass_gradient_kernel<<<blocks_for(n - 3 * quads), kThreads, 0, stream>>>(dy, dx, n, quads);
  } else {
    TRAINSIM_CUDA(cudaMemcpyAsync(dx, dy, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, stream));
  }
}

void global_avgpool_forward(const float* x, float* y, int64_t planes, int64_t plane, cudaStream_t stream) {
  if (planes > 0) global_avgpool_forward_kernel<<<blocks_for(planes * 32), kThreads, 0, stream>>>(x, y, planes, plane);
}

void global_avgpool_backward(const float* dy, float* dx, int64_t planes, int64_t plane, bool accumulate,
                             cudaStream_t stream) {
  if (planes * plane > 0) {
    global_avgpool_backward_kernel<<<blocks_for(planes * plane), kThreads, 0, stream>>>(dy, dx, planes, plane,
                                                                                       accumulate ? 1.0f : 0.0f);
  }
}

void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (n > 0) maxpool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, argmax, g);
}

void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolGeometry& g, bool accumulate,
                      cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (!accumulate) {
    TRAINSIM_CUDA(cudaMemsetAsync(dx, 0, sizeof(float) * static_cast<size_t>(g.planes * g.height * g.width), stream));
  }
  if (n > 0) maxpool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, argmax, dx, n);
}

void softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t positions, int64_t classes, float* loss,
                           float* dlogits, float dlogits_scale, cudaStream_t stream) {
  if (positions > 0) {
    softmax_cross_entropy_kernel<<<blocks_for(positions * 32), kThreads, 0, stream>>>(
        logits, labels, positions, classes, loss, dlogits, dlogits_scale);
  }
}

void sgd_step_all(const SgdTensor* tensors, int64_t count, float learning_rate, float momentum, float weight_decay,
                  bool zero_gradients, cudaStream_t stream) {
  constexpr int64_t kMostBlocksEach = 4096;  // a larger parameter's blocks stride over it
  int64_t i = 0;
  while (i < count) {
    SgdLaunch launch{};
    launch.first_block[0] = 0;
    for (; i < count && launch.count < kSgdTensorsPerLaunch; ++i) {
      if (tensors[i].n <= 0) continue;
      const int c = launch.count++;
      launch.w[c] = tensors[i].w;
      launch.g[c] = tensors[i].g;
      launch.v[c] = tensors[i].v;
      launch.n[c] = tensors[i].n;
      const int64_t blocks = (tensors[i].n + kThreads - 1) / kThreads;
      launch.first_block[c + 1] = launch.first_block[c] + (blocks < kMostBlocksEach ? blocks : kMostBlocksEach);
    }
    if (launch.count == 0) continue;
    sgd_step_all_kernel<<<static_cast<unsigned>(launch.first_block[launch.count]), kThreads, 0, stream>>>(
        launch, learning_rate, momentum, weight_decay, zero_gradients);
  }
}

void sgd_step_rows(float* w, float* v, const int64_t* rows, const float* values, int64_t count, int64_t width,
                   float learning_rate, float momentum, float weight_decay, cudaStream_t stream) {
  if (count * width > 0) {
    sgd_step_rows_kernel<<<blocks_for(count * width), kThreads, 0, stream>>>(w, v, rows, values, count, width,
                                                                             learning_rate, momentum, weight_decay);
  }
}

void spectrain_smooth(float* v, const float* g, int64_t n, float gamma, float rest, cudaStream_t stream) {
  if (n > 0) spectrain_smooth_kernel<<<blocks_for(n), kThreads, 0, stream>>>(v, g, n, gamma, rest);
}

void spectrain_predict(float* out, const float* w, const float* v, int64_t n, float step, cudaStream_t stream) {
  if (n > 0) spectrain_predict_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, w, v, n, step);
}

void scale_values(float* x, int64_t n, float scale, cudaStream_t stream) {
  if (n > 0) scale_values_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, scale);
}

void add_scaled(float* sum, const float* values, int64_t n, float scale, cudaStream_t stream) {
  if (n > 0) add_scaled_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sum, values, n, scale);
}

void round_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n > 0) round_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n);
}

}  // namespace trainsim::cuda
