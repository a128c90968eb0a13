// The GPU device's LSTM kernels (cuda_lstm_ops.cpp runs them between
// cuBLAS's products): one step's cell forward and backward over the batch,
// mirroring exec/tensor's Lstm (layers_lstm.cpp), and the outputs shifted
// one step for the recurrent weights' gradient.
#include <cstdint>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_launch.cuh"
#include "exec/cuda/cuda_sequence_kernels.hpp"

namespace trainsim::cuda {
namespace {

__device__ inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// Thread (b, j) of step t: its four gates' sums, activated and kept in
// `gates` (step-major {T, B, 4h}), c_t and tanh(c_t) (step-major {T, B, h}),
// and h_t into y ({B, T, h}).
__global__ void cell_forward(const float* xw, float* gates, float* c, float* tanh_c, float* y, int64_t batch,
                             int64_t tokens, int64_t hidden, int64_t t, bool recurrent) {
  TRAINSIM_GRID_LOOP(k, batch * hidden) {
    const int64_t b = k / hidden, j = k - b * hidden;
    const float* x = xw + (b * tokens + t) * 4 * hidden;
    float* g = gates + (t * batch + b) * 4 * hidden;
    const float zi = x[j] + (recurrent ? g[j] : 0.0f), zf = x[hidden + j] + (recurrent ? g[hidden + j] : 0.0f);
    const float zg = x[2 * hidden + j] + (recurrent ? g[2 * hidden + j] : 0.0f);
    const float zo = x[3 * hidden + j] + (recurrent ? g[3 * hidden + j] : 0.0f);
    const float i = sigmoid(zi), f = sigmoid(zf), gg = tanhf(zg), o = sigmoid(zo);
    g[j] = i;
    g[hidden + j] = f;
    g[2 * hidden + j] = gg;
    g[3 * hidden + j] = o;
    const int64_t at = (t * batch + b) * hidden + j;
    float ct = i * gg;
    if (t > 0) ct += f * c[at - batch * hidden];
    c[at] = ct;
    const float tc = tanhf(ct);
    tanh_c[at] = tc;
    y[(b * tokens + t) * hidden + j] = o * tc;
  }
}

// Thread (b, j) of step t: dh = dy_t + dh_next, dc = dh·o·(1 − tanh²c_t) +
// dc_next, the four gates' gradients before their nonlinearities into
// dgates ({B, T, 4h}), and dc_next = dc·f in place.
__global__ void cell_backward(const float* dy, const float* dh_next, float* dc_next, const float* gates, const float* c,
                              const float* tanh_c, float* dgates, int64_t batch, int64_t tokens, int64_t hidden,
                              int64_t t) {
  TRAINSIM_GRID_LOOP(k, batch * hidden) {
    const int64_t b = k / hidden, j = k - b * hidden;
    const float* g = gates + (t * batch + b) * 4 * hidden;
    const float i = g[j], f = g[hidden + j], gg = g[2 * hidden + j], o = g[3 * hidden + j];
    const int64_t at = (t * batch + b) * hidden + j;
    const float tc = tanh_c[at];
    const float dh = dy[(b * tokens + t) * hidden + j] + dh_next[k];
    const float dc = dh * o * (1.0f - tc * tc) + dc_next[k];
    float* d = dgates + (b * tokens + t) * 4 * hidden;
    d[j] = dc * gg * i * (1.0f - i);
    d[hidden + j] = t > 0 ? dc * c[at - batch * hidden] * f * (1.0f - f) : 0.0f;
    d[2 * hidden + j] = dc * i * (1.0f - gg * gg);
    d[3 * hidden + j] = dh * tc * o * (1.0f - o);
    dc_next[k] = dc * f;
  }
}

__global__ void shift_steps(const float* y, float* h_prev, int64_t batch, int64_t tokens, int64_t hidden) {
  TRAINSIM_GRID_LOOP(k, batch * tokens * hidden) {
    const int64_t t = (k / hidden) % tokens;
    h_prev[k] = t > 0 ? y[k - hidden] : 0.0f;
  }
}

}  // namespace

void lstm_cell_forward(const float* xw, float* gates, float* c, float* tanh_c, float* y, int64_t batch, int64_t tokens,
                       int64_t hidden, int64_t t, bool recurrent, cudaStream_t stream) {
  cell_forward<<<blocks_for(batch * hidden), kThreads, 0, stream>>>(xw, gates, c, tanh_c, y, batch, tokens, hidden, t,
                                                                    recurrent);
  TRAINSIM_CUDA(cudaGetLastError());
}

void lstm_cell_backward(const float* dy, const float* dh_next, float* dc_next, const float* gates, const float* c,
                        const float* tanh_c, float* dgates, int64_t batch, int64_t tokens, int64_t hidden, int64_t t,
                        cudaStream_t stream) {
  cell_backward<<<blocks_for(batch * hidden), kThreads, 0, stream>>>(dy, dh_next, dc_next, gates, c, tanh_c, dgates,
                                                                     batch, tokens, hidden, t);
  TRAINSIM_CUDA(cudaGetLastError());
}

void lstm_shift_steps(const float* y, float* h_prev, int64_t batch, int64_t tokens, int64_t hidden,
                      cudaStream_t stream) {
  shift_steps<<<blocks_for(batch * tokens * hidden), kThreads, 0, stream>>>(y, h_prev, batch, tokens, hidden);
  TRAINSIM_CUDA(cudaGetLastError());
}

}  // namespace trainsim::cuda
