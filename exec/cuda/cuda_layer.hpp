// Inside the GPU device: device arrays, the per-network context (stream,
// cuBLAS and cuDNN handles, workspace) and one layer's buffers and plan.
// Host code only; cuda_network.cpp and cuda_layer_ops.cpp share it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "model/layer.hpp"

namespace trainsim::cuda {

// cuBLAS's and cuDNN's alpha and beta: write the product (1, 0), add it (1, 1).
constexpr float kOne = 1.0f, kZero = 0.0f;

// An array in device memory, freed with its owner.
template <typename T>
// Its bytes charge the budget of the thread's ChargeTo as it is made (a
// virtual worker's share of the GPU: refused, before any allocation, past
// it), released when it is freed.
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(int64_t n) : n_(n) {
    if (n_ <= 0) return;
    budget_ = ChargeTo::current();
    if (budget_ != nullptr) budget_->charge(static_cast<int64_t>(bytes()));
    const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&p_), bytes());
    if (status != cudaSuccess && budget_ != nullptr) {
      budget_->release(static_cast<int64_t>(bytes()));
      if (status == cudaErrorMemoryAllocation) {  // the GPU full before the worker's share
        (void)cudaGetLastError();
        int device = -1;
        (void)cudaGetDevice(&device);
        budget_->refuse_unavailable(static_cast<int64_t>(bytes()), "cuda:" + std::to_string(device));
      }
    }
    check_cuda(status, "cudaMalloc", __FILE__, __LINE__);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : p_(std::exchange(other.p_, nullptr)), n_(std::exchange(other.n_, 0)), budget_(std::move(other.budget_)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(p_, other.p_);
    std::swap(n_, other.n_);
    std::swap(budget_, other.budget_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p_ == nullptr) return;
    cudaFree(p_);
    if (budget_ != nullptr) budget_->release(static_cast<int64_t>(bytes()));
  }
  T* get() const { return p_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return sizeof(T) * static_cast<size_t>(n_); }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
  std::shared_ptr<MemoryBudget> budget_;
};

// What every layer of one network launches with: one stream, the library
// handles bound to it, a shared workspace (one stream: no two layers use it
// at once) and a vector of ones (bias gradients as a matrix-vector product).
struct Context {
  int device = 0;
  bool exact = false;  // CudaPrecision::exact: no FFT or Winograd convolutions
  bool tf32 = false;   // CudaPrecision::tf32 or bf16: tensor-core TF32 products allowed
  bool bf16 = false;   // CudaPrecision::bf16: cuBLAS's products on bfloat16-rounded inputs
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  DeviceArray<char> workspace;
  DeviceArray<char> blas_workspace;  // cuBLAS's own (cublasSetWorkspace), made before any capture
  DeviceArray<float> ones;
  // CudaPrecision::bf16: each product's operands rounded to bfloat16 here,
  // in arrays grown as a product needs and kept while the network lives (a
  // captured graph names the array it ran with).
  std::unique_ptr<std::vector<DeviceArray<uint16_t>>> bf16_operands =
      std::make_unique<std::vector<DeviceArray<uint16_t>>>();
};

// Batch and layer normalization's eps, exec/tensor's: the kernels keep
// 1/sqrt(variance + eps) per channel or row.
inline constexpr double kNormEps = 1e-5;

// cuDNN's description of one convolution and the algorithms chosen for it.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t workspace_bytes = 0;
  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan();
};

// One batch normalization (training mode: the batch's own statistics) as
// {batch, channels, plane}, the statistics its forward keeps for its
// backward, and the kernels' scratch (cuda_kernels.hpp).
struct NormPlan {
  int64_t channels = 0, plane = 1;
  DeviceArray<float> mean, inv_std;  // per channel, from the last forward
  DeviceArray<float> variance;       // batchnorm: the last forward's biased variance per channel
  DeviceArray<float> scratch;
};

// One self-attention layer (cuda_sequence_ops.cpp): its geometry, Q, K, V
// and the heads' concatenated outputs {positions, d}, the probabilities
// {batch, heads, T, T}, and the backward's gradients of each.
struct AttentionPlan {
  int64_t tokens = 0, heads = 0, head_dim = 0;
  bool causal = false;
  float scale = 1.0f;  // 1/sqrt(head_dim)
  DeviceArray<float> q, k, v, concat, probs;
  DeviceArray<float> dq, dk, dv, dconcat, dprobs;
};

// One LSTM layer (cuda_lstm_ops.cpp): every step's input part x·W_xᵀ + b
// ({B, T, 4h}; the backward's gate gradients reuse it), the activated gates,
// c and tanh(c) step-major ({T, B, ·}), and the backward's running dh and dc
// ({B, h}) and the outputs one step back ({B, T, h}).
// The launches of one layer's pass as a CUDA graph (an LSTM's steps: a
// product and a cell kernel each, launch-bound at small batches), captured
// on the pass's second run and launched whole from then on; `eager` where
// capturing failed, the launches then made one by one (cuda_lstm_ops.cpp).
struct CapturedPass {
  int64_t runs = 0;
  bool eager = false;
  cudaGraphExec_t exec = nullptr;
  CapturedPass() = default;
  CapturedPass(const CapturedPass&) = delete;
  CapturedPass& operator=(const CapturedPass&) = delete;
  ~CapturedPass() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

struct LstmPlan {
  int64_t tokens = 0, in = 0, hidden = 0;
  DeviceArray<float> xw, gates, c, tanh_c, dh_next, dc_next, h_prev;
  // The forward's and the backward's launches (their buffers never move).
  mutable CapturedPass forward_graph, backward_graph;
};

enum class Op {
  linear,
  conv2d,
  relu,
  maxpool,
  batchnorm,
  global_avgpool,
  add,
  identity,
  embedding,
  embedding_bag,
  positional_encoding,
  layernorm,
  gelu,
  attention,  // cuda_sequence_ops.cpp
  lstm        // cuda_lstm_ops.cpp
};

// One model layer on the GPU. xs point at the outputs it reads, dy at the
// gradient of its own output; dxs at the gradients of what it reads (null
// where nothing needs one), written over, or added to where `accumulate`
// (a tensor read by several layers gathers their gradients: the last reader,
// whose backward runs first, writes; the others add). An identity layer
// (flatten, dropout, softmax) outputs its input and shares its gradient,
// owning nothing.
struct GpuLayer {
  Op op = Op::identity;
  // Whether the network computes it: one outside a worker's ranges
  // (CudaNetworkOptions::held) has no parameters, plan or workspace, and an
  // output only where a range reads or carries it.
  bool computes = true;
  std::string name;
  std::vector<int64_t> in_shape, out_shape;  // per sample
  int64_t batch = 0;
  bool has_bias = false;
  std::vector<DeviceArray<float>> params, grads, velocity;  // weights then bias
  std::vector<std::vector<int64_t>> param_shapes;
  DeviceArray<float> own_y;
  DeviceArray<int32_t> argmax;
  std::vector<const float*> xs;
  float* y = nullptr;
  const float* dy = nullptr;
  std::vector<float*> dxs;
  std::vector<bool> accumulate;
  int64_t rows = 0, in_features = 0, out_features = 0;  // linear; rows also of the sequence layers
  int64_t vocabulary = 0;                               // embedding, embedding_bag
  DeviceArray<int32_t> touched;  // embedding_bag: per table row, 1 where a whole pass's gradient touched it
  ConvPlan conv;
  NormPlan norm;  // batchnorm per channel, layernorm per row
  PoolGeometry pool;
  AttentionPlan attention;
  LstmPlan lstm;
  DeviceArray<float> table;  // positional encoding: the {T, d} table

  const float* x() const { return xs[0]; }
  float* dx() const { return dxs[0]; }
  // cuBLAS's and cuDNN's beta for dx: 1 adds into it, 0 writes it.
  const float* dx_beta() const;

  int64_t in_count() const { return batch * element_count(in_shape); }
  int64_t out_count() const { return batch * element_count(out_shape); }
};

// The GPU op of `layer`; InputError naming `where` for an op without a kernel.
Op op_of(const Layer& layer, const std::string& where);
// Sets up `layer` (its op, geometry and, for a convolution, cuDNN's plan;
// the shapes, batch and params must be filled) and returns the workspace it needs.
size_t plan_layer(GpuLayer& layer, const Layer& model_layer, Context& context);
// y = f(x) for the layer's batch.
void forward(const GpuLayer& layer, Context& context);
// dx from dy (when dx is not null); ADDS the parameter gradients into grads.
void backward(const GpuLayer& layer, Context& context);

// Column-major out = op(A)·op(B) + beta·out (m × n, k inner), fp32 in
// and out (cuda_gemm.cpp): cublasSgemm, or with c.bf16 A and B rounded to
// bfloat16 on the stream and cublasGemmEx on the tensor cores with fp32 sums.
void gemm(const Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, const float* beta, float* out, int64_t ldc);
// `batch` such products, each operand `stride` floats after the one before.
struct StridedOperand {
  const float* data;
  int64_t ld, stride;
};
void gemm_strided_batched(const Context& c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                          StridedOperand a, StridedOperand b, float* out, int64_t ldc, int64_t stride_out,
                          int64_t batch);

// y = x·Wᵀ (+ b where b is not null) over `rows` rows, W row-major {out, in}.
void dense_forward(Context& c, const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t in,
                   int64_t out);
// dW += dyᵀ·x, db += Σ_rows dy (where db is not null), dx = dy·W (where dx is
// not null; added to it when `accumulate`).
void dense_backward(Context& c, const float* x, const float* dy, const float* w, float* dw, float* db, float* dx,
                    bool accumulate, int64_t rows, int64_t in, int64_t out);

// The Transformer layers (cuda_sequence_ops.cpp): embedding, positional
// encoding, layer norm, GELU and causal or full self-attention; and the
// embedding bag.
bool is_sequence_op(Op op);
void plan_sequence(GpuLayer& layer, const Layer& model_layer);
void sequence_forward(const GpuLayer& layer, Context& context);
void sequence_backward(const GpuLayer& layer, Context& context);

// An embedding bag's table gradient is sparse rows (exec/tensor's
// EmbeddingBag). In a whole pass its backward adds them into the dense
// gradient on the GPU, marking the rows touched, and step_touched_rows
// steps those rows alone (Sgd's lazy step). A range pass leaves them to
// the host: backward_leaving_rows runs a layer's backward without them (the
// ids carry no gradient), and CudaNetwork::backward_range builds the rows
// from the ids and dy it brings back.
void backward_leaving_rows(const GpuLayer& layer, Context& context);
void step_touched_rows(const GpuLayer& layer, float learning_rate, float momentum, float weight_decay,
                       Context& context);

// The LSTM (cuda_lstm_ops.cpp): a unidirectional recurrence from zero state
// as exec/tensor's Lstm, its products through cuBLAS.
void plan_lstm(GpuLayer& layer);
void lstm_forward(const GpuLayer& layer, Context& context);
void lstm_backward(const GpuLayer& layer, Context& context);

}  // namespace trainsim::cuda
