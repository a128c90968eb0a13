// The GPU device's LSTM, as exec/tensor's Lstm computes it
// (layers_lstm.cpp): the input's part of every step in one cuBLAS product,
// one recurrent product and one cell kernel (cuda_lstm_kernels.cu) per
// step, and backpropagation through time with the weights' gradients and
// dx over the whole sequence at once. Row-major {r, c} arrays are handed to
// cuBLAS as their column-major transposes.
#include <cstdint>
#include <vector>

#include "exec/cuda/cuda_layer.hpp"
#include "exec/cuda/cuda_sequence_kernels.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {
namespace {

// `launches` on c.stream: as they are on the first run (the libraries make
// their workspaces outside a capture), captured as a graph and launched on
// the second, the graph launched from then on. Where capturing fails (a
// library call a capture does not allow), as they are from then on.
template <typename Launches>
void run_captured(CapturedPass& pass, Context& c, Launches launches) {
  if (pass.eager || pass.runs++ == 0) return launches();
  if (pass.exec == nullptr) {
    // An error an earlier launch left is that launch's, not the capture's refusal.
    TRAINSIM_CUDA(cudaGetLastError());
    cudaGraph_t graph = nullptr;
    bool captured = cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (captured) {
      try {
        launches();
      } catch (const CudaError&) {
        captured = false;
      } catch (...) {  // not a launch the capture refused: the stream ends its capture, the error goes on
        cudaGraph_t abandoned = nullptr;
        if (cudaStreamEndCapture(c.stream, &abandoned) == cudaSuccess && abandoned != nullptr) {
          cudaGraphDestroy(abandoned);
        }
        (void)cudaGetLastError();
        throw;
      }
      captured = cudaStreamEndCapture(c.stream, &graph) == cudaSuccess && captured && graph != nullptr &&
                 cudaGraphInstantiate(&pass.exec, graph, 0) == cudaSuccess;
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!captured) {
      (void)cudaGetLastError();  // the failed capture's error, not the pass's
      pass.exec = nullptr;
      pass.eager = true;
      return launches();
    }
  }
  TRAINSIM_CUDA(cudaGraphLaunch(pass.exec, c.stream));
}

// Column-major C = op(A)·op(B) + beta·C (m × n, k inner).
void product(Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* a,
             int64_t lda, const float* b, int64_t ldb, const float* beta, float* out, int64_t ldc) {
  gemm(c, ta, tb, m, n, k, a, lda, b, ldb, beta, out, ldc);
}

}  // namespace

void plan_lstm(GpuLayer& l) {
  LstmPlan& p = l.lstm;
  p.tokens = l.in_shape[0];
  p.in = l.in_shape[1];
  p.hidden = l.out_shape[1];
  const int64_t h = p.hidden;
  TRAINSIM_CHECK(l.param_shapes.size() == 2 && l.param_shapes[0] == (std::vector<int64_t>{4 * h, p.in + h}),
                 l.name + ": an LSTM's weights are not {4h, in + h} and its bias");
  l.rows = l.batch * p.tokens;  // positions: c.ones covers the bias gradient's sum over them
  p.xw = DeviceArray<float>(l.rows * 4 * h);
  p.gates = DeviceArray<float>(l.rows * 4 * h);
  p.c = DeviceArray<float>(l.rows * h);
  p.tanh_c = DeviceArray<float>(l.rows * h);
  p.h_prev = DeviceArray<float>(l.rows * h);
  p.dh_next = DeviceArray<float>(l.batch * h);
  p.dc_next = DeviceArray<float>(l.batch * h);
}

namespace {

// Every step's launches, as exec/tensor's Lstm computes them.
void lstm_forward_steps(const GpuLayer& l, Context& c) {
  const LstmPlan& p = l.lstm;
  const int64_t h = p.hidden, batch = l.batch, tokens = p.tokens, width = p.in + h;
  const float* w = l.params[0].get();  // [W_x, W_h], {4h, in + h}
  // Every step's x_t·W_xᵀ + b ({P, 4h}): column-major W_x·xᵀ, W_x the first `in` columns of W.
  product(c, CUBLAS_OP_T, CUBLAS_OP_N, 4 * h, l.rows, p.in, w, width, l.x(), p.in, &kZero, p.xw.get(), 4 * h);
  add_row_bias(p.xw.get(), l.params[1].get(), l.rows, 4 * h, c.stream);
  for (int64_t t = 0; t < tokens; ++t) {
    float* gates_t = p.gates.get() + t * batch * 4 * h;
    // h_{t-1}·W_hᵀ ({B, 4h}) from y's step t − 1 (rows T·h apart).
    if (t > 0) {
      product(c, CUBLAS_OP_T, CUBLAS_OP_N, 4 * h, batch, h, w + p.in, width, l.y + (t - 1) * h, tokens * h, &kZero,
              gates_t, 4 * h);
    }
    lstm_cell_forward(p.xw.get(), p.gates.get(), p.c.get(), p.tanh_c.get(), l.y, batch, tokens, h, t, t > 0, c.stream);
  }
}

void lstm_backward_steps(const GpuLayer& l, Context& c) {
  const LstmPlan& p = l.lstm;
  const int64_t h = p.hidden, batch = l.batch, tokens = p.tokens, width = p.in + h;
  const float* w = l.params[0].get();
  float* dw = l.grads[0].get();
  float* dgates = p.xw.get();  // the input's part is spent: every step's gate gradients take its place
  TRAINSIM_CUDA(cudaMemsetAsync(p.dh_next.get(), 0, p.dh_next.bytes(), c.stream));
  TRAINSIM_CUDA(cudaMemsetAsync(p.dc_next.get(), 0, p.dc_next.bytes(), c.stream));
  for (int64_t t = tokens - 1; t >= 0; --t) {
    lstm_cell_backward(l.dy, p.dh_next.get(), p.dc_next.get(), p.gates.get(), p.c.get(), p.tanh_c.get(), dgates, batch,
                       tokens, h, t, c.stream);
    // dh_next = d gates_t·W_h ({B, h}): column-major W_hᵀ·d gates_tᵀ, the gates' rows T·4h apart.
    if (t > 0) {
      product(c, CUBLAS_OP_N, CUBLAS_OP_N, h, batch, 4 * h, w + p.in, width, dgates + t * 4 * h, tokens * 4 * h, &kZero,
              p.dh_next.get(), h);
    }
  }
  // dW_x += d gatesᵀ·x and dW_h += d gatesᵀ·h_{t-1} over every position (W's rows in + h apart).
  product(c, CUBLAS_OP_N, CUBLAS_OP_T, p.in, 4 * h, l.rows, l.x(), p.in, dgates, 4 * h, &kOne, dw, width);
  lstm_shift_steps(l.y, p.h_prev.get(), batch, tokens, h, c.stream);
  product(c, CUBLAS_OP_N, CUBLAS_OP_T, h, 4 * h, l.rows, p.h_prev.get(), h, dgates, 4 * h, &kOne, dw + p.in, width);
  // db += the column sums of d gates.
  TRAINSIM_CUBLAS(cublasSgemv(c.blas, CUBLAS_OP_N, static_cast<int>(4 * h), static_cast<int>(l.rows), &kOne, dgates,
                              static_cast<int>(4 * h), c.ones.get(), 1, &kOne, l.grads[1].get(), 1));
  // dx = d gates·W_x.
  if (l.dx() != nullptr) {
    product(c, CUBLAS_OP_N, CUBLAS_OP_N, p.in, l.rows, 4 * h, w, width, dgates, 4 * h, l.dx_beta(), l.dx(), p.in);
  }
}

}  // namespace

void lstm_forward(const GpuLayer& l, Context& c) {
  run_captured(l.lstm.forward_graph, c, [&] { lstm_forward_steps(l, c); });
}

void lstm_backward(const GpuLayer& l, Context& c) {
  run_captured(l.lstm.backward_graph, c, [&] { lstm_backward_steps(l, c); });
}

}  // namespace trainsim::cuda
