// The GPU device's Transformer layers: token embedding, positional encoding,
// layer norm, exact GELU (cuda_sequence_kernels.cu) and multi-head
// self-attention, its projections and per-head products through cuBLAS
// (one strided-batched product over the batch per head), as exec/tensor's
// Attention computes them (layers_sequence.cpp); and the embedding bag,
// whose table gradient is sparse rows (layers_sparse.cpp).
#include <cmath>
#include <cstdint>
#include <utility>

#include "exec/cuda/cuda_layer.hpp"
#include "exec/cuda/cuda_sequence_kernels.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {
namespace {

// The {T, d} table of `layer` as exec/tensor computes it: the CPU kernel's
// output for a zero input.
Tensor positional_table(const Layer& layer, const std::vector<int64_t>& in_shape) {
  Layer alone = layer;
  alone.inputs = {kModelInput};
  const Model model{"positional-table", "", in_shape, 1, {alone}};
  const Network net = build_network(model);
  std::vector<int64_t> shape{1};
  shape.insert(shape.end(), in_shape.begin(), in_shape.end());
  std::vector<LayerCache> caches(1);
  return forward_range(net, Weights(1), 0, 0, Tensor(shape), caches);
}

// C = op(A)·op(B) for every sample of the batch, A, B and C `stride_*`
// floats apart from one sample to the next (column-major, as cuBLAS).
struct Batched {
  const float* a;
  int lda;
  int64_t stride_a;
  const float* b;
  int ldb;
  int64_t stride_b;
  float* c;
  int ldc;
  int64_t stride_c;
};

void gemm_batched(Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                  const Batched& g, int64_t batch) {
  gemm_strided_batched(c, ta, tb, m, n, k, {g.a, g.lda, g.stride_a}, {g.b, g.ldb, g.stride_b}, g.c, g.ldc, g.stride_c,
                       batch);
}

void attention_forward(const GpuLayer& l, Context& c) {
  const AttentionPlan& p = l.attention;
  const int64_t d = l.in_shape[1], t = p.tokens, hd = p.head_dim, sample = t * d, block = p.heads * t * t;
  const auto param = [&](size_t i) { return l.params[i].get(); };
  dense_forward(c, l.x(), param(0), param(1), p.q.get(), l.rows, d, d);
  dense_forward(c, l.x(), param(2), param(3), p.k.get(), l.rows, d, d);
  dense_forward(c, l.x(), param(4), param(5), p.v.get(), l.rows, d, d);
  const auto ld = static_cast<int>(d), lt = static_cast<int>(t);
  for (int64_t h = 0; h < p.heads; ++h) {
    // Row-major S_h = Q_h·K_hᵀ is column-major K_hᵀᵀ·Q_h over {hd, T} views with leading dimension d.
    gemm_batched(c, CUBLAS_OP_T, CUBLAS_OP_N, t, t, hd,
                 {p.k.get() + h * hd, ld, sample, p.q.get() + h * hd, ld, sample, p.probs.get() + h * t * t, lt, block},
                 l.batch);
  }
  attention_softmax(p.probs.get(), l.batch * p.heads * t, t, p.scale, p.causal, c.stream);
  for (int64_t h = 0; h < p.heads; ++h) {
    // O_h = P_h·V_h.
    gemm_batched(
        c, CUBLAS_OP_N, CUBLAS_OP_N, hd, t, t,
        {p.v.get() + h * hd, ld, sample, p.probs.get() + h * t * t, lt, block, p.concat.get() + h * hd, ld, sample},
        l.batch);
  }
  dense_forward(c, p.concat.get(), param(6), param(7), l.y, l.rows, d, d);
}

void attention_backward(const GpuLayer& l, Context& c) {
  const AttentionPlan& p = l.attention;
  const int64_t d = l.in_shape[1], t = p.tokens, hd = p.head_dim, sample = t * d, block = p.heads * t * t;
  const auto param = [&](size_t i) { return l.params[i].get(); };
  const auto grad = [&](size_t i) { return l.grads[i].get(); };
  dense_backward(c, p.concat.get(), l.dy, param(6), grad(6), grad(7), p.dconcat.get(), false, l.rows, d, d);
  const auto ld = static_cast<int>(d), lt = static_cast<int>(t);
  for (int64_t h = 0; h < p.heads; ++h) {
    // dV_h = P_hᵀ·dO_h and dP_h = dO_h·V_hᵀ.
    gemm_batched(
        c, CUBLAS_OP_N, CUBLAS_OP_T, hd, t, t,
        {p.dconcat.get() + h * hd, ld, sample, p.probs.get() + h * t * t, lt, block, p.dv.get() + h * hd, ld, sample},
        l.batch);
    gemm_batched(
        c, CUBLAS_OP_T, CUBLAS_OP_N, t, t, hd,
        {p.v.get() + h * hd, ld, sample, p.dconcat.get() + h * hd, ld, sample, p.dprobs.get() + h * t * t, lt, block},
        l.batch);
  }
  attention_softmax_backward(p.probs.get(), p.dprobs.get(), l.batch * p.heads * t, t, p.scale, c.stream);
  for (int64_t h = 0; h < p.heads; ++h) {
    // dQ_h = dS_h·K_h and dK_h = dS_hᵀ·Q_h.
    gemm_batched(
        c, CUBLAS_OP_N, CUBLAS_OP_N, hd, t, t,
        {p.k.get() + h * hd, ld, sample, p.dprobs.get() + h * t * t, lt, block, p.dq.get() + h * hd, ld, sample},
        l.batch);
    gemm_batched(
        c, CUBLAS_OP_N, CUBLAS_OP_T, hd, t, t,
        {p.q.get() + h * hd, ld, sample, p.dprobs.get() + h * t * t, lt, block, p.dk.get() + h * hd, ld, sample},
        l.batch);
  }
  // dx = dQ·W_q + dK·W_k + dV·W_v (the first written or added as the layer's dx is).
  float* dx = l.dx();
  dense_backward(c, l.x(), p.dq.get(), param(0), grad(0), grad(1), dx, dx != nullptr && l.accumulate[0], l.rows, d, d);
  dense_backward(c, l.x(), p.dk.get(), param(2), grad(2), grad(3), dx, true, l.rows, d, d);
  dense_backward(c, l.x(), p.dv.get(), param(4), grad(4), grad(5), dx, true, l.rows, d, d);
}

// dx of a layer reading token ids: zero (written, not added to).
void ids_carry_no_gradient(const GpuLayer& l, Context& c) {
  if (l.dx() != nullptr && !l.accumulate[0]) {
    TRAINSIM_CUDA(cudaMemsetAsync(l.dx(), 0, sizeof(float) * static_cast<size_t>(l.in_count()), c.stream));
  }
}

}  // namespace

bool is_sequence_op(Op op) {
  return op == Op::embedding || op == Op::embedding_bag || op == Op::positional_encoding || op == Op::layernorm ||
         op == Op::gelu || op == Op::attention;
}

void plan_sequence(GpuLayer& l, const Layer& layer) {
  const int64_t width = l.out_shape.back();
  l.rows = l.out_count() / width;  // positions (or rows of the normalization)
  if (l.op == Op::embedding || l.op == Op::embedding_bag) l.vocabulary = layer.sparse_rows;
  if (l.op == Op::embedding_bag) {
    l.touched = DeviceArray<int32_t>(l.vocabulary);
    TRAINSIM_CUDA(cudaMemset(l.touched.get(), 0, l.touched.bytes()));
    TRAINSIM_CUDA(cudaStreamSynchronize(nullptr));  // the network's stream does not wait for the default stream
  }
  if (l.op == Op::positional_encoding) {
    const Tensor table = positional_table(layer, l.in_shape);
    l.table = DeviceArray<float>(table.size());
    TRAINSIM_CUDA(cudaMemcpy(l.table.get(), table.data.data(), l.table.bytes(), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before it lands, and the
    // network's stream does not wait for the default stream's work.
    TRAINSIM_CUDA(cudaStreamSynchronize(nullptr));
  }
  if (l.op == Op::layernorm) {
    l.norm.mean = DeviceArray<float>(l.rows);
    l.norm.inv_std = DeviceArray<float>(l.rows);
    l.norm.scratch = DeviceArray<float>(layernorm_scratch_floats(l.rows, width));
  }
  if (l.op == Op::attention) {
    AttentionPlan& p = l.attention;
    p.tokens = l.in_shape[0];
    p.heads = layer.heads;
    p.head_dim = width / layer.heads;
    p.causal = layer.causal;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
    for (DeviceArray<float>* a : {&p.q, &p.k, &p.v, &p.concat, &p.dq, &p.dk, &p.dv, &p.dconcat}) {
      *a = DeviceArray<float>(l.out_count());
    }
    p.probs = DeviceArray<float>(l.batch * p.heads * p.tokens * p.tokens);
    p.dprobs = DeviceArray<float>(p.probs.size());
  }
}

void sequence_forward(const GpuLayer& l, Context& c) {
  const int64_t width = l.out_shape.back();
  switch (l.op) {
    case Op::embedding:
      return embedding_forward(l.x(), l.params[0].get(), l.y, l.rows, width, l.vocabulary, c.stream);
    case Op::embedding_bag:
      return embedding_bag_forward(l.x(), l.params[0].get(), l.y, l.batch, l.in_shape[0], width, l.vocabulary,
                                   c.stream);
    case Op::positional_encoding:
      return add_table(l.x(), l.table.get(), l.y, l.batch, l.table.size(), c.stream);
    case Op::layernorm:
      return layernorm_forward(l.x(), l.y, l.params[0].get(), l.params[1].get(), l.norm.mean.get(),
                               l.norm.inv_std.get(), l.rows, width, kNormEps, c.stream);
    case Op::gelu:
      return gelu_forward(l.x(), l.y, l.out_count(), c.stream);
    case Op::attention:
      return attention_forward(l, c);
    default:
      return;
  }
}

void sequence_backward(const GpuLayer& l, Context& c) {
  const int64_t width = l.out_shape.back();
  switch (l.op) {
    case Op::embedding:
      embedding_backward(l.x(), l.dy, l.grads[0].get(), l.rows, width, l.vocabulary, c.stream);
      return ids_carry_no_gradient(l, c);
    case Op::embedding_bag:
      embedding_bag_backward(l.x(), l.dy, l.grads[0].get(), l.touched.get(), l.batch, l.in_shape[0], width,
                             l.vocabulary, c.stream);
      return ids_carry_no_gradient(l, c);
    case Op::positional_encoding:
      if (l.dx() != nullptr) pass_gradient(l.dy, l.dx(), l.out_count(), l.accumulate[0], c.stream);
      return;
    case Op::layernorm:
      return layernorm_backward(l.x(), l.dy, l.params[0].get(), l.norm.mean.get(), l.norm.inv_std.get(), l.dx(),
                                l.dx() != nullptr && l.accumulate[0], l.grads[0].get(), l.grads[1].get(),
                                l.norm.scratch.get(), l.rows, width, c.stream);
    case Op::gelu:
      if (l.dx() != nullptr) gelu_backward(l.x(), l.dy, l.dx(), l.out_count(), l.accumulate[0], c.stream);
      return;
    case Op::attention:
      return attention_backward(l, c);
    default:
      return;
  }
}

void backward_leaving_rows(const GpuLayer& l, Context& c) {
  if (l.op == Op::embedding_bag) return ids_carry_no_gradient(l, c);
  backward(l, c);
}

void step_touched_rows(const GpuLayer& l, float learning_rate, float momentum, float weight_decay, Context& c) {
  TRAINSIM_CHECK(l.op == Op::embedding_bag, l.name + ": a lazy step of a layer without sparse rows");
  sgd_step_touched_rows(l.params[0].get(), l.grads[0].get(), l.velocity[0].get(), l.touched.get(), l.vocabulary,
                        l.out_shape.back(), learning_rate, momentum, weight_decay, c.stream);
}

}  // namespace trainsim::cuda
