// Training-mode batch normalization on the GPU (cuda_kernels.hpp): Ioffe &
// Szegedy 2015, Algorithm 1 and its backward, per channel over batch and
// positions. Each channel is split into slices of whole samples, one block
// per (channel, slice), so a wide batch fills the GPU: cuDNN's
// cudnnBatchNormalizationForwardTraining took 420 µs forward and 1.1 ms
// backward on fmnist-resnet20's 1024 × 16 × 28 × 28 (docs/results.md).
// Each block reduces its slice to partials; one warp per channel then
// combines them in double (Chan et al.'s pairwise update for the variance,
// so a mean far from zero costs no precision), in a fixed order, so every
// result is deterministic.
#include <cstdint>

#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/cuda_launch.cuh"

namespace trainsim::cuda {
namespace {

// About this many values per block: enough to hide memory latency, few
// enough that a 16-channel layer still gives hundreds of blocks.
constexpr int64_t kValuesPerBlock = 8192;

constexpr int64_t kMaxSlices = 65535;  // gridDim.y

// Division of n < 2^31 by a fixed d by a multiply and a shift (Granlund &
// Montgomery 1994, §4): a slice's index into sample and position without a
// division per value.
struct Divisor {
  uint32_t magic = 1, shift = 0;
  explicit Divisor(uint32_t d = 1) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ uint32_t divide(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

// The slices of one normalization: `samples` whole samples per block,
// `slices` blocks per channel.
struct Slicing {
  int64_t batch = 0, channels = 0, plane = 0, samples = 1, slices = 1;
  Divisor by_plane;
};

Slicing slicing(int64_t batch, int64_t channels, int64_t plane) {
  Slicing s{batch, channels, plane, 1, 1, Divisor(static_cast<uint32_t>(plane))};
  s.samples = kValuesPerBlock / plane > 1 ? kValuesPerBlock / plane : 1;
  if (s.samples > batch) s.samples = batch;
  if ((batch + s.samples - 1) / s.samples > kMaxSlices) s.samples = (batch + kMaxSlices - 1) / kMaxSlices;
  s.slices = (batch + s.samples - 1) / s.samples;
  return s;
}

// The block's channel, its first sample and its count of values.
struct Slice {
  int64_t c, first;
  int count;
};

__device__ Slice this_slice(const Slicing& s) {
  const int64_t c = blockIdx.x;
  const int64_t first = int64_t{blockIdx.y} * s.samples;
  const int64_t last = first + s.samples < s.batch ? first + s.samples : s.batch;
  return {c, first, static_cast<int>((last - first) * s.plane)};
}

// Four values per thread in flight: the loops below are unrolled by 4 and
// their pointers do not alias.

// Offset of the slice's j-th value (sample-major, position-minor).
__device__ int64_t offset(const Slicing& s, const Slice& b, int j) {
  const auto n = static_cast<int>(s.by_plane.divide(static_cast<uint32_t>(j)));
  return ((b.first + n) * s.channels + b.c) * s.plane + (j - n * static_cast<int>(s.plane));
}

// The block's sum of `v` (every thread gets it).
__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / kWarp];
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read from a previous call
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float sum = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) sum += partial[w];
  return sum;
}

// partials[(c·slices + slice)·2 + {0, 1}] = the slice's sum and its sum of
// squared deviations from its own mean.
__global__ void norm_stats_kernel(const float* __restrict__ x, float* __restrict__ partials, Slicing s) {
  const Slice b = this_slice(s);
  float sum = 0.0f;
#pragma unroll 4
  for (int j = threadIdx.x; j < b.count; j += kThreads) sum += x[offset(s, b, j)];
  sum = block_sum(sum);
  const float mean = sum / static_cast<float>(b.count);
  float squares = 0.0f;
#pragma unroll 4
  for (int j = threadIdx.x; j < b.count; j += kThreads) {
    const float d = x[offset(s, b, j)] - mean;
    squares += d * d;
  }
  squares = block_sum(squares);
  if (threadIdx.x == 0) {
    float* out = partials + (b.c * s.slices + blockIdx.y) * 2;
    out[0] = sum;
    out[1] = squares;
  }
}

// Values, mean and sum of squared deviations of a part of a channel.
struct Moments {
  double count = 0, mean = 0, squares = 0;
};

// Chan et al. 1979: the moments of the union of two disjoint parts.
__device__ Moments merged(const Moments& a, const Moments& b) {
  const double count = a.count + b.count;
  if (count == 0) return a;
  const double delta = b.mean - a.mean;
  return {count, a.mean + delta * b.count / count, a.squares + b.squares + delta * delta * a.count * b.count / count};
}

constexpr int kChannelsPerBlock = kThreads / 32;  // one warp per channel
unsigned channel_blocks(int64_t channels) {
  return static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock);
}

// One warp per channel: mean, 1/sqrt(biased variance + eps) and (where
// asked) the biased variance from the slices' partials, each lane merging
// every 32nd, then the lanes pairwise.
__global__ void norm_combine_stats_kernel(const float* __restrict__ partials, float* __restrict__ mean,
                                          float* __restrict__ inv_std, float* __restrict__ variance, Slicing s,
                                          float eps) {
  const int64_t c = blockIdx.x * int64_t{kChannelsPerBlock} + threadIdx.x / 32;
  if (c >= s.channels) return;  // whole warps leave together
  Moments m;
  for (int64_t k = threadIdx.x % 32; k < s.slices; k += 32) {
    const float* p = partials + (c * s.slices + k) * 2;
    const int64_t samples = (k + 1) * s.samples < s.batch ? s.samples : s.batch - k * s.samples;
    const double count = static_cast<double>(samples * s.plane);
    m = merged(m, {count, p[0] / count, p[1]});
  }
  for (int o = 16; o > 0; o /= 2) {
    const Moments other{__shfl_down_sync(0xffffffffu, m.count, o), __shfl_down_sync(0xffffffffu, m.mean, o),
                        __shfl_down_sync(0xffffffffu, m.squares, o)};
    m = merged(m, other);
  }
  if (threadIdx.x % 32 == 0) {
    mean[c] = static_cast<float>(m.mean);
    inv_std[c] = static_cast<float>(1.0 / sqrt(m.squares / m.count + eps));
    if (variance != nullptr) variance[c] = static_cast<float>(m.squares / m.count);
  }
}

// The running statistics folded as exec's batch norm folds them
// (layers_norm.cpp): the batch's variance made unbiased.
__global__ void norm_fold_running_kernel(const float* __restrict__ mean, const float* __restrict__ variance,
                                         float* __restrict__ running_mean, float* __restrict__ running_var,
                                         int64_t channels, float momentum, double unbiased) {
  TRAINSIM_GRID_LOOP(c, channels) {
    running_mean[c] += momentum * (mean[c] - running_mean[c]);
    running_var[c] += momentum * (static_cast<float>(variance[c] * unbiased) - running_var[c]);
  }
}

// y = (x − mean)·inv_std·scale + shift over the block's slice, in the CPU's
// order (the deviation first: a mean far from zero costs no precision).
__global__ void norm_apply_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ mean,
                                  const float* __restrict__ inv_std, const float* __restrict__ scale,
                                  const float* __restrict__ shift, Slicing s) {
  const Slice b = this_slice(s);
  const float m = mean[b.c], r = inv_std[b.c], a = scale[b.c], z = shift[b.c];
#pragma unroll 4
  for (int j = threadIdx.x; j < b.count; j += kThreads) {
    const int64_t i = offset(s, b, j);
    y[i] = (x[i] - m) * r * a + z;
  }
}

// partials[(c·slices + slice)·2 + {0, 1}] = the slice's Σ dy and Σ dy·x̂.
__global__ void norm_grad_sums_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      const float* __restrict__ mean, const float* __restrict__ inv_std,
                                      float* __restrict__ partials, Slicing s) {
  const Slice b = this_slice(s);
  const float m = mean[b.c], r = inv_std[b.c];
  float sum = 0.0f, dot = 0.0f;
#pragma unroll 4
  for (int j = threadIdx.x; j < b.count; j += kThreads) {
    const int64_t i = offset(s, b, j);
    sum += dy[i];
    dot += dy[i] * (x[i] - m) * r;
  }
  sum = block_sum(sum);
  dot = block_sum(dot);
  if (threadIdx.x == 0) {
    float* out = partials + (b.c * s.slices + blockIdx.y) * 2;
    out[0] = sum;
    out[1] = dot;
  }
}

// One warp per channel: dshift += Σ dy, dscale += Σ dy·x̂; totals[c] keeps both.
__global__ void norm_combine_grads_kernel(const float* __restrict__ partials, float* __restrict__ dscale,
                                          float* __restrict__ dshift, float* __restrict__ totals, Slicing s) {
  const int64_t c = blockIdx.x * int64_t{kChannelsPerBlock} + threadIdx.x / 32;
  if (c >= s.channels) return;
  double sum = 0, dot = 0;
  for (int64_t k = threadIdx.x % 32; k < s.slices; k += 32) {
    sum += partials[(c * s.slices + k) * 2];
    dot += partials[(c * s.slices + k) * 2 + 1];
  }
  for (int o = 16; o > 0; o /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, o);
    dot += __shfl_down_sync(0xffffffffu, dot, o);
  }
  if (threadIdx.x % 32 == 0) {
    dshift[c] += static_cast<float>(sum);
    dscale[c] += static_cast<float>(dot);
    totals[c * 2] = static_cast<float>(sum);
    totals[c * 2 + 1] = static_cast<float>(dot);
  }
}

// dx = scale·inv_std·(dy − Σdy/M − x̂·Σ(dy·x̂)/M), M = batch·plane (+= when `accumulate`).
__global__ void norm_input_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                       const float* __restrict__ mean, const float* __restrict__ inv_std,
                                       const float* __restrict__ scale, const float* __restrict__ totals,
                                       float* __restrict__ dx, bool accumulate, Slicing s) {
  const Slice b = this_slice(s);
  const float inv_count = 1.0f / static_cast<float>(s.batch * s.plane);
  const float m = mean[b.c], r = inv_std[b.c], a = scale[b.c] * r;
  const float mean_dy = totals[b.c * 2] * inv_count, mean_dot = totals[b.c * 2 + 1] * inv_count;
#pragma unroll 4
  for (int j = threadIdx.x; j < b.count; j += kThreads) {
    const int64_t i = offset(s, b, j);
    const float g = a * (dy[i] - mean_dy - (x[i] - m) * r * mean_dot);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

dim3 grid_of(const Slicing& s) { return {static_cast<unsigned>(s.channels), static_cast<unsigned>(s.slices)}; }

}  // namespace

int64_t norm_scratch_floats(int64_t batch, int64_t channels, int64_t plane) {
  return channels * (slicing(batch, channels, plane).slices * 2 + 2);
}

void norm_forward_training(const float* x, float* y, const float* scale, const float* shift, float* mean,
                           float* inv_std, float* variance, float* scratch, int64_t batch, int64_t channels,
                           int64_t plane, double eps, cudaStream_t stream) {
  if (batch * channels * plane == 0) return;
  const Slicing s = slicing(batch, channels, plane);
  norm_stats_kernel<<<grid_of(s), kThreads, 0, stream>>>(x, scratch, s);
  norm_combine_stats_kernel<<<channel_blocks(channels), kThreads, 0, stream>>>(scratch, mean, inv_std, variance, s,
                                                                               static_cast<float>(eps));
  norm_apply_kernel<<<grid_of(s), kThreads, 0, stream>>>(x, y, mean, inv_std, scale, shift, s);
}

void norm_backward_training(const float* x, const float* dy, const float* scale, const float* mean,
                            const float* inv_std, float* dx, bool accumulate, float* dscale, float* dshift,
                            float* scratch, int64_t batch, int64_t channels, int64_t plane, cudaStream_t stream) {
  if (batch * channels * plane == 0) return;
  const Slicing s = slicing(batch, channels, plane);
  float* totals = scratch + channels * s.slices * 2;
  norm_grad_sums_kernel<<<grid_of(s), kThreads, 0, stream>>>(x, dy, mean, inv_std, scratch, s);
  norm_combine_grads_kernel<<<channel_blocks(channels), kThreads, 0, stream>>>(scratch, dscale, dshift, totals, s);
  if (dx != nullptr) {
    norm_input_grad_kernel<<<grid_of(s), kThreads, 0, stream>>>(x, dy, mean, inv_std, scale, totals, dx, accumulate, s);
  }
}

void norm_fold_running(const float* mean, const float* variance, float* running_mean, float* running_var,
                       int64_t channels, int64_t count, float momentum, cudaStream_t stream) {
  if (channels <= 0) return;
  const double unbiased = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  norm_fold_running_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(mean, variance, running_mean, running_var,
                                                                          channels, momentum, unbiased);
}

}  // namespace trainsim::cuda
