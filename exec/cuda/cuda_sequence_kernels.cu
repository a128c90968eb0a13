// The GPU device's own kernels for Transformer layers
// (cuda_sequence_kernels.hpp). Rows (layer norm, attention's softmax) go one
// warp per row; elementwise kernels are grid-stride loops.
#include <cmath>
#include <cstdint>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_launch.cuh"
#include "exec/cuda/cuda_sequence_kernels.hpp"

namespace trainsim::cuda {
namespace {

// Blocks of kThreads holding one warp per row.
unsigned blocks_for_rows(int64_t rows) { return static_cast<unsigned>((rows * kWarp + kThreads - 1) / kThreads); }

// The warp's row (rows beyond the last leave whole warps at once) and lane.
#define TRAINSIM_WARP_ROW(r, lane, rows)                                      \
  const int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; \
  const int lane = static_cast<int>(threadIdx.x % kWarp);                     \
  if (r >= (rows)) return

// Ba, Kiros & Hinton 2016, as exec/tensor's LayerNorm: the mean and the
// biased variance in float, 1/sqrt(variance + eps) in double.
__global__ void layernorm_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                         const float* __restrict__ scale, const float* __restrict__ shift,
                                         float* __restrict__ mean, float* __restrict__ inv_std, int64_t rows,
                                         int64_t width, double eps) {
  TRAINSIM_WARP_ROW(r, lane, rows);
  const float* xr = x + r * width;
  float sum = 0.0f;
  for (int64_t j = lane; j < width; j += kWarp) sum += xr[j];
  const float m = warp_sum(sum) / static_cast<float>(width);
  float squares = 0.0f;
  for (int64_t j = lane; j < width; j += kWarp) squares += (xr[j] - m) * (xr[j] - m);
  const float variance = warp_sum(squares) / static_cast<float>(width);
  const auto inv = static_cast<float>(1.0 / sqrt(static_cast<double>(variance) + eps));
  for (int64_t j = lane; j < width; j += kWarp) y[r * width + j] = (xr[j] - m) * inv * scale[j] + shift[j];
  if (lane == 0) {
    mean[r] = m;
    inv_std[r] = inv;
  }
}

__global__ void layernorm_input_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                            const float* __restrict__ scale, const float* __restrict__ mean,
                                            const float* __restrict__ inv_std, float* __restrict__ dx, bool accumulate,
                                            int64_t rows, int64_t width) {
  TRAINSIM_WARP_ROW(r, lane, rows);
  const float m = mean[r], inv = inv_std[r], d = static_cast<float>(width);
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t j = lane; j < width; j += kWarp) {
    const float g = dy[r * width + j] * scale[j];
    sum_g += g;
    sum_gx += g * (x[r * width + j] - m) * inv;
  }
  sum_g = warp_sum(sum_g);
  sum_gx = warp_sum(sum_gx);
  for (int64_t j = lane; j < width; j += kWarp) {
    const int64_t i = r * width + j;
    const float g = dy[i] * scale[j];
    const float v = (inv / d) * (d * g - sum_g - (x[i] - m) * inv * sum_gx);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

// The parameter gradients in two steps, each deterministic. First, blocks
// of 32 columns × about kRowsPerSlice rows, each thread summing every 8th row of
// its column, write one partial per column and slice; then one warp per
// column adds its slices' partials.
constexpr int kRowPhases = kThreads / kWarp;
constexpr int64_t kRowsPerSlice = 256, kMaxSlices = 65535;  // the latter: gridDim.y

int64_t row_slices(int64_t rows) {
  const int64_t slices = (rows + kRowsPerSlice - 1) / kRowsPerSlice;
  return slices < kMaxSlices ? slices : kMaxSlices;
}
int64_t rows_per_slice(int64_t rows) { return (rows + row_slices(rows) - 1) / row_slices(rows); }

__global__ void layernorm_param_partials_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                                const float* __restrict__ mean, const float* __restrict__ inv_std,
                                                float* __restrict__ partials, int64_t rows, int64_t width,
                                                int64_t slice_rows) {
  const int64_t j = blockIdx.x * int64_t{kWarp} + threadIdx.x % kWarp;
  const int phase = static_cast<int>(threadIdx.x / kWarp);
  const int64_t first = int64_t{blockIdx.y} * slice_rows;
  const int64_t last = first + slice_rows < rows ? first + slice_rows : rows;
  float dot = 0.0f, sum = 0.0f;
  if (j < width) {
    for (int64_t r = first + phase; r < last; r += kRowPhases) {
      const int64_t i = r * width + j;
      dot += dy[i] * (x[i] - mean[r]) * inv_std[r];
      sum += dy[i];
    }
  }
  __shared__ float dots[kRowPhases][kWarp], sums[kRowPhases][kWarp];
  dots[phase][threadIdx.x % kWarp] = dot;
  sums[phase][threadIdx.x % kWarp] = sum;
  __syncthreads();
  if (phase == 0 && j < width) {
    for (int p = 1; p < kRowPhases; ++p) {
      dot += dots[p][threadIdx.x];
      sum += sums[p][threadIdx.x];
    }
    float* out = partials + (blockIdx.y * width + j) * 2;
    out[0] = dot;
    out[1] = sum;
  }
}

__global__ void layernorm_param_grads_kernel(const float* __restrict__ partials, float* __restrict__ dscale,
                                             float* __restrict__ dshift, int64_t slices, int64_t width) {
  TRAINSIM_WARP_ROW(j, lane, width);
  float dot = 0.0f, sum = 0.0f;
  for (int64_t k = lane; k < slices; k += kWarp) {
    dot += partials[(k * width + j) * 2];
    sum += partials[(k * width + j) * 2 + 1];
  }
  dot = warp_sum(dot);
  sum = warp_sum(sum);
  if (lane == 0) {
    dscale[j] += dot;
    dshift[j] += sum;
  }
}

// Φ(v) = (1 + erf(v/√2))/2.
__device__ float normal_cdf(float v) { return 0.5f * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void gelu_forward_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  TRAINSIM_GRID_LOOP(i, n) { y[i] = x[i] * normal_cdf(x[i]); }
}

__global__ void gelu_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                                     int64_t n, bool accumulate) {
  TRAINSIM_GRID_LOOP(i, n) {
    const float v = x[i];
    const float g = dy[i] * (normal_cdf(v) + v * expf(-0.5f * v * v) * 0.39894228040143268f);  // 1/√(2π)
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__device__ int64_t token(const float* ids, int64_t i, int64_t vocabulary) {
  const auto id = static_cast<int64_t>(ids[i]);
  return id >= 0 && id < vocabulary ? id : -1;
}

__global__ void embedding_forward_kernel(const float* __restrict__ ids, const float* __restrict__ table,
                                         float* __restrict__ y, int64_t positions, int64_t width, int64_t vocabulary) {
  TRAINSIM_GRID_LOOP(i, positions * width) {
    const int64_t id = token(ids, i / width, vocabulary);
    y[i] = id < 0 ? 0.0f : table[id * width + i % width];
  }
}

__global__ void embedding_backward_kernel(const float* __restrict__ ids, const float* __restrict__ dy,
                                          float* __restrict__ dtable, int64_t positions, int64_t width,
                                          int64_t vocabulary) {
  TRAINSIM_GRID_LOOP(i, positions * width) {
    const int64_t id = token(ids, i / width, vocabulary);
    if (id >= 0) atomicAdd(dtable + id * width + i % width, dy[i]);
  }
}

// An embedding bag's id as exec/tensor's: below 0 padding (so -0.5 too),
// then the integer part; beyond the table (or NaN), padding as well, as
// the host reads them (cuda_range_gradients.cpp).
__device__ int64_t bag_token(float value, int64_t vocabulary) {
  if (!(value >= 0.0f && value < static_cast<float>(vocabulary))) return -1;
  return static_cast<int64_t>(value);
}

__global__ void embedding_bag_forward_kernel(const float* __restrict__ ids, const float* __restrict__ table,
                                             float* __restrict__ y, int64_t batch, int64_t tokens, int64_t width,
                                             int64_t vocabulary) {
  TRAINSIM_GRID_LOOP(i, batch * width) {
    const int64_t b = i / width, j = i % width;
    float sum = 0.0f;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t id = bag_token(ids[b * tokens + t], vocabulary);
      if (id >= 0) sum += table[id * width + j];
    }
    y[i] = sum;
  }
}

__global__ void embedding_bag_backward_kernel(const float* __restrict__ ids, const float* __restrict__ dy,
                                              float* __restrict__ dtable, int32_t* __restrict__ touched, int64_t batch,
                                              int64_t tokens, int64_t width, int64_t vocabulary) {
  TRAINSIM_GRID_LOOP(i, batch * tokens * width) {
    const int64_t token = i / width, j = i % width;
    const int64_t id = bag_token(ids[token], vocabulary);
    if (id < 0) continue;
    atomicAdd(dtable + id * width + j, dy[(token / tokens) * width + j]);
    if (j == 0) touched[id] = 1;
  }
}

__global__ void sgd_step_touched_rows_kernel(float* __restrict__ w, float* __restrict__ g, float* __restrict__ v,
                                             const int32_t* __restrict__ touched, int64_t rows, int64_t width, float lr,
                                             float mu, float wd) {
  TRAINSIM_GRID_LOOP(i, rows * width) {
    if (touched[i / width] == 0) continue;
    sgd_value(w + i, g[i], v + i, lr, mu, wd);
    g[i] = 0.0f;
  }
}

__global__ void add_table_kernel(const float* __restrict__ x, const float* __restrict__ table, float* __restrict__ y,
                                 int64_t n, int64_t table_size) {
  TRAINSIM_GRID_LOOP(i, n) { y[i] = x[i] + table[i % table_size]; }
}

// The row max is subtracted first; the sum is taken in float.
__global__ void attention_softmax_kernel(float* __restrict__ scores, int64_t rows, int64_t tokens, float scale,
                                         bool causal) {
  TRAINSIM_WARP_ROW(r, lane, rows);
  float* row = scores + r * tokens;
  const int64_t seen = causal ? r % tokens + 1 : tokens;
  float top = -INFINITY;
  for (int64_t s = lane; s < seen; s += kWarp) top = fmaxf(top, row[s]);
  top = warp_max(top) * scale;
  float sum = 0.0f;
  for (int64_t s = lane; s < seen; s += kWarp) {
    row[s] = expf(row[s] * scale - top);
    sum += row[s];
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t s = lane; s < tokens; s += kWarp) row[s] = s < seen ? row[s] * inv : 0.0f;
}

__global__ void attention_softmax_backward_kernel(const float* __restrict__ p, float* __restrict__ dp, int64_t rows,
                                                  int64_t tokens, float scale) {
  TRAINSIM_WARP_ROW(r, lane, rows);
  const float* pr = p + r * tokens;
  float* dr = dp + r * tokens;
  float dot = 0.0f;
  for (int64_t s = lane; s < tokens; s += kWarp) dot += pr[s] * dr[s];
  dot = warp_sum(dot);
  for (int64_t s = lane; s < tokens; s += kWarp) dr[s] = pr[s] * (dr[s] - dot) * scale;
}

}  // namespace

void layernorm_forward(const float* x, float* y, const float* scale, const float* shift, float* mean, float* inv_std,
                       int64_t rows, int64_t width, double eps, cudaStream_t stream) {
  if (rows * width == 0) return;
  layernorm_forward_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(x, y, scale, shift, mean, inv_std, rows,
                                                                           width, eps);
}

void layernorm_backward(const float* x, const float* dy, const float* scale, const float* mean, const float* inv_std,
                        float* dx, bool accumulate, float* dscale, float* dshift, float* scratch, int64_t rows,
                        int64_t width, cudaStream_t stream) {
  if (rows * width == 0) return;
  if (dx != nullptr) {
    layernorm_input_grad_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(x, dy, scale, mean, inv_std, dx,
                                                                                accumulate, rows, width);
  }
  const dim3 grid(static_cast<unsigned>((width + kWarp - 1) / kWarp), static_cast<unsigned>(row_slices(rows)));
  layernorm_param_partials_kernel<<<grid, kThreads, 0, stream>>>(x, dy, mean, inv_std, scratch, rows, width,
                                                                 rows_per_slice(rows));
  layernorm_param_grads_kernel<<<blocks_for_rows(width), kThreads, 0, stream>>>(scratch, dscale, dshift,
                                                                                row_slices(rows), width);
}

int64_t layernorm_scratch_floats(int64_t rows, int64_t width) { return row_slices(rows) * width * 2; }

void gelu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream) {
  if (n > 0) gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n, accumulate);
}

void embedding_forward(const float* ids, const float* table, float* y, int64_t positions, int64_t width,
                       int64_t vocabulary, cudaStream_t stream) {
  if (positions * width > 0) {
    embedding_forward_kernel<<<blocks_for(positions * width), kThreads, 0, stream>>>(ids, table, y, positions, width,
                                                                                     vocabulary);
  }
}

void embedding_backward(const float* ids, const float* dy, float* dtable, int64_t positions, int64_t width,
                        int64_t vocabulary, cudaStream_t stream) {
  if (positions * width > 0) {
    embedding_backward_kernel<<<blocks_for(positions * width), kThreads, 0, stream>>>(ids, dy, dtable, positions, width,
                                                                                      vocabulary);
  }
}

void embedding_bag_forward(const float* ids, const float* table, float* y, int64_t batch, int64_t tokens, int64_t width,
                           int64_t vocabulary, cudaStream_t stream) {
  if (batch * width > 0) {
    embedding_bag_forward_kernel<<<blocks_for(batch * width), kThreads, 0, stream>>>(ids, table, y, batch, tokens,
                                                                                     width, vocabulary);
  }
}

void embedding_bag_backward(const float* ids, const float* dy, float* dtable, int32_t* touched, int64_t batch,
                            int64_t tokens, int64_t width, int64_t vocabulary, cudaStream_t stream) {
  if (batch * tokens * width > 0) {
    embedding_bag_backward_kernel<<<blocks_for(batch * tokens * width), kThreads, 0, stream>>>(
        ids, dy, dtable, touched, batch, tokens, width, vocabulary);
  }
}

void sgd_step_touched_rows(float* w, float* g, float* v, int32_t* touched, int64_t rows, int64_t width,
                           float learning_rate, float momentum, float weight_decay, cudaStream_t stream) {
  if (rows * width <= 0) return;
  sgd_step_touched_rows_kernel<<<blocks_for(rows * width), kThreads, 0, stream>>>(
      w, g, v, touched, rows, width, learning_rate, momentum, weight_decay);
  TRAINSIM_CUDA(cudaMemsetAsync(touched, 0, sizeof(int32_t) * static_cast<size_t>(rows), stream));
}

void add_table(const float* x, const float* table, float* y, int64_t batch, int64_t table_size, cudaStream_t stream) {
  if (batch * table_size > 0) {
    add_table_kernel<<<blocks_for(batch * table_size), kThreads, 0, stream>>>(x, table, y, batch * table_size,
                                                                              table_size);
  }
}

void attention_softmax(float* scores, int64_t rows, int64_t tokens, float scale, bool causal, cudaStream_t stream) {
  if (rows * tokens > 0) {
    attention_softmax_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(scores, rows, tokens, scale, causal);
  }
}

void attention_softmax_backward(const float* p, float* dp, int64_t rows, int64_t tokens, float scale,
                                cudaStream_t stream) {
  if (rows * tokens > 0) {
    attention_softmax_backward_kernel<<<blocks_for_rows(rows), kThreads, 0, stream>>>(p, dp, rows, tokens, scale);
  }
}

}  // namespace trainsim::cuda
