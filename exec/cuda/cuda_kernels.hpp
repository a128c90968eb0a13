// The CUDA kernels of the GPU device that no library provides, each
// launched on `stream` over raw device pointers. Each mirrors the CPU kernel
// of the same name in exec/tensor, which is its reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainsim::cuda {

// y[r, j] += bias[j] for rows r < rows, j < width.
void add_row_bias(float* y, const float* bias, int64_t rows, int64_t width, cudaStream_t stream);
// db[c] += Σ over samples and positions of dy[n, c, p] for dy {batch,
// channels, plane}: a convolution's bias gradient.
void add_channel_sums(const float* dy, float* db, int64_t batch, int64_t channels, int64_t plane,
                      cudaStream_t stream);
// y = max(x, 0).
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = dy where y > 0, else 0 (dx += that when `accumulate`).
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream);

// y = a + b.
void add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// dx = dy (dx += dy when `accumulate`).
void pass_gradient(const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream);

// Global average pooling of planes (batch · channels) of `plane` values:
// y[p] = mean of plane p; backward dx[p, i] = dy[p] / plane (+= when `accumulate`).
void global_avgpool_forward(const float* x, float* y, int64_t planes, int64_t plane, cudaStream_t stream);
void global_avgpool_backward(const float* dy, float* dx, int64_t planes, int64_t plane, bool accumulate,
                             cudaStream_t stream);

// Max pooling over planes x {height, width} (planes = batch · channels) with
// the CPU kernel's windows: [o·stride − pad, + kernel) clipped to the input,
// the first largest value kept; `argmax` receives its index in x.
struct PoolGeometry {
  int64_t planes = 0, height = 0, width = 0, out_height = 0, out_width = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
void maxpool_forward(const float* x, float* y, int32_t* argmax, const PoolGeometry& g, cudaStream_t stream);
// dx = 0 (unless `accumulate`), then dx[argmax[i]] += dy[i] (overlapping windows add).
void maxpool_backward(const float* dy, const int32_t* argmax, float* dx, const PoolGeometry& g, bool accumulate,
                      cudaStream_t stream);

// Softmax cross-entropy of `positions` rows of `classes` logits against
// `labels`: loss[r] = log Σ exp(z − max) + max − z[label] and
// dlogits[r, j] = (softmax_j − [j = label]) · dlogits_scale / positions
// (docs/equations.md, the mean over positions; the scale a micro-batch's
// share of the batch).
void softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t positions, int64_t classes, float* loss,
                           float* dlogits, float dlogits_scale, cudaStream_t stream);

// Momentum SGD, PyTorch's rule (exec/optim/sgd.hpp): g' = g + wd·w;
// v = μ·v + g'; w −= lr·v (with μ = 0: w −= lr·g', v untouched), on
// `count` parameters, a launch per kSgdTensorsPerLaunch of them (their
// pointers passed in the launch, as PyTorch's multi-tensor apply), each
// gradient set to zero after its step where `zero_gradients`.
struct SgdTensor {
  float* w = nullptr;
  float* g = nullptr;
  float* v = nullptr;  // null where the momentum is 0
  int64_t n = 0;
};
inline constexpr int kSgdTensorsPerLaunch = 32;
// SpecTrain (exec/optim/spectrain.hpp): its eq. 1, v = γ·v + rest·g, and
// its eq. 4, out = w − step·v.
void spectrain_smooth(float* v, const float* g, int64_t n, float gamma, float rest, cudaStream_t stream);
void spectrain_predict(float* out, const float* w, const float* v, int64_t n, float step, cudaStream_t stream);
void sgd_step_all(const SgdTensor* tensors, int64_t count, float learning_rate, float momentum, float weight_decay,
                  bool zero_gradients, cudaStream_t stream);
// Sgd's lazy step of a table of rows of `width`: each of the `count`
// distinct rows listed in `rows` by its gradient's sum (row r of `values`,
// stepped as 0 + value, as the host's), `v` null where the momentum is 0.
void sgd_step_rows(float* w, float* v, const int64_t* rows, const float* values, int64_t count, int64_t width,
                   float learning_rate, float momentum, float weight_decay, cudaStream_t stream);
// x[i] *= scale: an AllReduce's sum made the members' mean, as the host's
// one multiplication per value.
void scale_values(float* x, int64_t n, float scale, cudaStream_t stream);
// sum = (sum + values)·scale, or sum·scale where values is null.
void add_scaled(float* sum, const float* values, int64_t n, float scale, cudaStream_t stream);
// y = x rounded to bfloat16 (to nearest, ties to even), y's values as bits.
void round_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);

// Training-mode batch normalization of x {batch, channels, plane} with the
// batch's own statistics (cuda_norm_kernels.cu): y = scale·(x − mean)·inv_std
// + shift per channel, keeping mean and inv_std = 1/sqrt(biased variance +
// eps) for the backward, and the biased variance (where `variance` is not
// null) for the running statistics. `scratch` holds norm_scratch_floats floats.
int64_t norm_scratch_floats(int64_t batch, int64_t channels, int64_t plane);
void norm_forward_training(const float* x, float* y, const float* scale, const float* shift, float* mean,
                           float* inv_std, float* variance, float* scratch, int64_t batch, int64_t channels,
                           int64_t plane, double eps, cudaStream_t stream);
// Its backward from the forward's mean and inv_std: ADDS Σ dy·x̂ into dscale
// and Σ dy into dshift; dx (when not null) is written, or added to when
// `accumulate`.
void norm_backward_training(const float* x, const float* dy, const float* scale, const float* mean,
                            const float* inv_std, float* dx, bool accumulate, float* dscale, float* dshift,
                            float* scratch, int64_t batch, int64_t channels, int64_t plane, cudaStream_t stream);

// The running statistics after a training forward, as exec's batch norm
// folds them (exec/tensor/layers_norm.cpp): running_mean += momentum·(mean
// − running_mean), running_var += momentum·(variance·count/(count − 1) −
// running_var), the forward's biased variance, count the values per
// channel (batch × plane).
void norm_fold_running(const float* mean, const float* variance, float* running_mean, float* running_var,
                       int64_t channels, int64_t count, float momentum, cudaStream_t stream);

}  // namespace trainsim::cuda
