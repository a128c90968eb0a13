// The GPU device's own kernels for Transformer layers
// (cuda_sequence_kernels.cu) and the LSTM (cuda_lstm_kernels.cu), each
// launched on `stream` over raw device pointers and mirroring the CPU kernel
// of the same layer in exec/tensor (layers_norm.cpp, layers_sequence.cpp,
// layers_lstm.cpp), its reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainsim::cuda {

// Layer norm over rows of `width` values: y = scale·(x − mean)·inv_std +
// shift per row, keeping each row's mean and inv_std = 1/sqrt(biased
// variance + eps) for the backward.
void layernorm_forward(const float* x, float* y, const float* scale, const float* shift, float* mean, float* inv_std,
                       int64_t rows, int64_t width, double eps, cudaStream_t stream);
// Its backward: dx (when not null; += when `accumulate`) = inv_std/d·(d·g −
// Σg − x̂·Σ(g·x̂)) with g = dy·scale per row; ADDS Σ_rows dy·x̂ into dscale
// and Σ_rows dy into dshift. `scratch` holds layernorm_scratch_floats floats.
int64_t layernorm_scratch_floats(int64_t rows, int64_t width);
void layernorm_backward(const float* x, const float* dy, const float* scale, const float* mean, const float* inv_std,
                        float* dx, bool accumulate, float* dscale, float* dshift, float* scratch, int64_t rows,
                        int64_t width, cudaStream_t stream);

// Exact GELU, y = x·Φ(x); backward dx = dy·(Φ(x) + x·φ(x)) (+= when `accumulate`).
void gelu_forward(const float* x, float* y, int64_t n, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, bool accumulate, cudaStream_t stream);

// Embedding: y[i] = table[ids[i]] (rows of `width`; ids are floats holding
// integers below `vocabulary`, checked on the host); backward ADDS dy[i]
// into dtable[ids[i]].
void embedding_forward(const float* ids, const float* table, float* y, int64_t positions, int64_t width,
                       int64_t vocabulary, cudaStream_t stream);
void embedding_backward(const float* ids, const float* dy, float* dtable, int64_t positions, int64_t width,
                        int64_t vocabulary, cudaStream_t stream);

// Embedding bag (exec/tensor's EmbeddingBag): y[b] = Σ_t table[ids[b, t]]
// in token order (ids {batch, tokens}; an id below 0, or not below
// `vocabulary`, is padding and skipped). Its backward ADDS dy[b] into
// dtable[id] for every token and sets touched[id] = 1 (the rows a lazy step
// moves).
void embedding_bag_forward(const float* ids, const float* table, float* y, int64_t batch, int64_t tokens, int64_t width,
                           int64_t vocabulary, cudaStream_t stream);
void embedding_bag_backward(const float* ids, const float* dy, float* dtable, int32_t* touched, int64_t batch,
                            int64_t tokens, int64_t width, int64_t vocabulary, cudaStream_t stream);
// Momentum SGD on the touched rows of a table of `rows` rows of `width`
// (exec/optim's Sgd on a sparse gradient: rows no gradient touched keep
// their weights and velocity), each stepped row's gradient zeroed; then
// every row untouched again.
void sgd_step_touched_rows(float* w, float* g, float* v, int32_t* touched, int64_t rows, int64_t width,
                           float learning_rate, float momentum, float weight_decay, cudaStream_t stream);

// y = x + table, the {tokens, width} table added to each sample.
void add_table(const float* x, const float* table, float* y, int64_t batch, int64_t table_size, cudaStream_t stream);

// Attention's probabilities: for each of `rows` rows of `tokens` scores
// (row t of its {tokens, tokens} block), p = softmax(scores·scale) over
// s ≤ t when `causal` (else every s), 0 beyond; written over the scores.
void attention_softmax(float* scores, int64_t rows, int64_t tokens, float scale, bool causal, cudaStream_t stream);
// Its backward in place: dp becomes dS = p ⊙ (dp − rowsum(p ⊙ dp))·scale.
void attention_softmax_backward(const float* p, float* dp, int64_t rows, int64_t tokens, float scale,
                                cudaStream_t stream);

// One LSTM step t over the batch (exec/tensor's Lstm): each gate's sum, the
// input's part from xw ({B, T, 4h}: x_t·W_xᵀ + b) plus, when `recurrent`,
// h_{t-1}·W_hᵀ already in `gates` at step t (step-major {T, B, 4h});
// i, f, o = σ, g = tanh written over it; c_t = f·c_{t-1} + i·g and
// tanh(c_t) into c and tanh_c (step-major {T, B, h}); h_t into y ({B, T, h}).
void lstm_cell_forward(const float* xw, float* gates, float* c, float* tanh_c, float* y, int64_t batch, int64_t tokens,
                       int64_t hidden, int64_t t, bool recurrent, cudaStream_t stream);
// Its backward at step t from dy ({B, T, h}), dh_next ({B, h}: the next
// step's gate gradients times W_h) and dc_next ({B, h}), with the forward's
// gates, c and tanh_c: the gate gradients before their nonlinearities into
// dgates ({B, T, 4h}) and dc_next = dc·f written over dc_next.
void lstm_cell_backward(const float* dy, const float* dh_next, float* dc_next, const float* gates, const float* c,
                        const float* tanh_c, float* dgates, int64_t batch, int64_t tokens, int64_t hidden, int64_t t,
                        cudaStream_t stream);
// h_prev[b, t] = y[b, t − 1], 0 at t = 0 (both {B, T, h}).
void lstm_shift_steps(const float* y, float* h_prev, int64_t batch, int64_t tokens, int64_t hidden,
                      cudaStream_t stream);

}  // namespace trainsim::cuda
