// The GPU device's layers: linear with cuBLAS, conv2d with cuDNN, relu,
// pooling, add and batch norm with the device's own kernels, identity layers
// as aliases; the Transformer layers are in cuda_sequence_ops.cpp.
// Row-major {rows, features} buffers are column-major {features, rows} to
// cuBLAS, so y = x·Wᵀ is the column-major product W(as stored, transposed)·x.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "exec/cuda/cuda_layer.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {
namespace {

// Most device memory one convolution's algorithm may use as workspace.
constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

}  // namespace

Op op_of(const Layer& layer, const std::string& where) {
  if (layer.op == "linear") return Op::linear;
  if (layer.op == "conv2d") return Op::conv2d;
  if (layer.op == "relu") return Op::relu;
  if (layer.op == "maxpool") return Op::maxpool;
  if (layer.op == "batchnorm") return Op::batchnorm;
  if (layer.op == "add" && layer.inputs.size() == 2) return Op::add;
  if (layer.op == "avgpool" && layer.output_shape.size() == 1) return Op::global_avgpool;
  if (layer.op == "flatten" || layer.op == "dropout" || layer.op == "softmax") return Op::identity;
  if (layer.op == "embedding" && !layer.sparse) return Op::embedding;
  if (layer.op == "embedding_bag") return Op::embedding_bag;
  if (layer.op == "positional_encoding") return Op::positional_encoding;
  if (layer.op == "layernorm") return Op::layernorm;
  if (layer.op == "gelu") return Op::gelu;
  if (layer.op == "attention" && layer.inputs.size() == 1) return Op::attention;
  if (layer.op == "lstm") return Op::lstm;
  throw InputError(where,
                   "op '" + layer.op + "'" + (layer.op == "embedding" && layer.sparse ? " with sparse rows" : "") +
                       " has no CUDA kernel yet",
                   "a model of linear, conv2d, batchnorm, relu, maxpool, global avgpool, add (of two), flatten, "
                   "dropout, softmax, dense embedding, embedding bag, positional encoding, layernorm, gelu, "
                   "self-attention and LSTM layers");
}

namespace {

cudnnTensorDescriptor_t nchw(int64_t n, const std::vector<int64_t>& chw) {
  cudnnTensorDescriptor_t d = nullptr;
  TRAINSIM_CUDNN(cudnnCreateTensorDescriptor(&d));
  TRAINSIM_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                            static_cast<int>(chw[0]), static_cast<int>(chw[1]),
                                            static_cast<int>(chw[2])));
  return d;
}

// Whether an algorithm transforms its operands (FFT, Winograd) rather than
// summing plain fp32 products; CudaPrecision::exact leaves those out.
bool transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The fastest algorithm cuDNN measured within the workspace limit that
// computes in fp32 (no tensor-core TF32) unless `tf32`, and, when `exact`,
// without FFT or Winograd transforms.
template <typename Perf>
Perf pick(const Perf* perf, int count, const Context& c, const std::string& where) {
  for (int i = 0; i < count; ++i) {
    const bool tensor_ops = perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                            perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (perf[i].status == CUDNN_STATUS_SUCCESS && (c.tf32 || !tensor_ops) && perf[i].memory <= kMaxConvWorkspaceBytes &&
        !(c.exact && transforms(perf[i].algo))) {
      return perf[i];
    }
  }
  throw CudaError(where + ": cuDNN offers no " + (c.tf32 ? "" : "fp32 ") +
                  "convolution algorithm within 1 GiB of workspace");
}

// The algorithms cuDNN's search chose for a convolution of one shape on one
// GPU under one precision, kept for the process's life (its descriptors
// unset) and shared by its networks: every network of that shape runs what
// the first one timed (in validate, the profile's), and a network made while
// others compute on the GPU (a pipeline's next micro-batch) searches
// nothing.
using ConvKey = std::tuple<int, bool, bool, int64_t, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
                           std::array<int64_t, 5>>;
struct ConvChoice {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t workspace_bytes = 0;
};
// One GPU's: a search there holds its lock alone, so a network made on
// another GPU waits for no search (which may wait for that GPU's whole
// device, an NCCL kernel included whose peer that network's thread queues).
struct ConvChoices {
  std::mutex mu;
  std::map<ConvKey, ConvChoice> chosen;
};
std::atomic<int64_t> conv_searches{0};
ConvChoices& conv_choices(int device) {
  static std::mutex mu;
  static auto* per_gpu = new std::map<int, ConvChoices>;  // never destroyed, as the runtime it names
  std::lock_guard lock(mu);
  return (*per_gpu)[device];
}

// cuDNN's fastest algorithms for p's descriptors that `c` allows (pick).
ConvChoice search_algorithms(const ConvPlan& p, const Context& c, const std::string& where) {
  int found = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> f{};
  TRAINSIM_CUDNN(cudnnFindConvolutionForwardAlgorithm(c.dnn, p.x, p.w, p.conv, p.y, f.size(), &found, f.data()));
  const auto fp = pick(f.data(), found, c, where);
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> d{};
  TRAINSIM_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(c.dnn, p.w, p.y, p.conv, p.x, d.size(), &found, d.data()));
  const auto dp = pick(d.data(), found, c, where);
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> g{};
  TRAINSIM_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(c.dnn, p.x, p.y, p.conv, p.w, g.size(), &found, g.data()));
  const auto gp = pick(g.data(), found, c, where);
  return {fp.algo, dp.algo, gp.algo, std::max({size_t{fp.memory}, size_t{dp.memory}, size_t{gp.memory}})};
}

size_t plan_conv(GpuLayer& l, const Layer& layer, Context& c) {
  const WindowSpec& w = layer.window;
  ConvPlan& p = l.conv;
  p.x = nchw(l.batch, l.in_shape);
  p.y = nchw(l.batch, l.out_shape);
  p.bias = nchw(1, {l.out_shape[0], 1, 1});
  const std::vector<int64_t>& ws = l.param_shapes[0];  // {out, in / groups, kh, kw}
  TRAINSIM_CUDNN(cudnnCreateFilterDescriptor(&p.w));
  TRAINSIM_CUDNN(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(ws[0]),
                                            static_cast<int>(ws[1]), static_cast<int>(ws[2]), static_cast<int>(ws[3])));
  TRAINSIM_CUDNN(cudnnCreateConvolutionDescriptor(&p.conv));
  TRAINSIM_CUDNN(cudnnSetConvolution2dDescriptor(p.conv, static_cast<int>(w.pad_h), static_cast<int>(w.pad_w),
                                                 static_cast<int>(w.stride_h), static_cast<int>(w.stride_w), 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TRAINSIM_CUDNN(cudnnSetConvolutionGroupCount(p.conv, static_cast<int>(w.groups)));
  // Default math lets fp32 convolutions use TF32 tensor cores; FMA math keeps them fp32.
  TRAINSIM_CUDNN(cudnnSetConvolutionMathType(p.conv, c.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  std::array<int, 4> dims{};
  TRAINSIM_CUDNN(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &dims[0], &dims[1], &dims[2], &dims[3]));
  if (dims[1] != l.out_shape[0] || dims[2] != l.out_shape[1] || dims[3] != l.out_shape[2]) {
    throw InputError(l.name, "output shape disagrees with its window", "cuDNN's output shape for the layer");
  }
  const ConvKey key{c.device,   c.exact,     c.tf32, l.batch,
                    l.in_shape, l.out_shape, ws,     {w.pad_h, w.pad_w, w.stride_h, w.stride_w, w.groups}};
  ConvChoices& choices = conv_choices(c.device);
  std::lock_guard lock(choices.mu);  // one search of a shape, alone among the GPU's
  auto it = choices.chosen.find(key);
  if (it == choices.chosen.end()) {
    it = choices.chosen.emplace(key, search_algorithms(p, c, l.name)).first;
    ++conv_searches;
  }
  const ConvChoice& chosen = it->second;
  p.forward = chosen.forward;
  p.backward_data = chosen.backward_data;
  p.backward_filter = chosen.backward_filter;
  p.workspace_bytes = chosen.workspace_bytes;
  return p.workspace_bytes;
}

void linear_forward(const GpuLayer& l, Context& c) {
  dense_forward(c, l.x(), l.params[0].get(), l.has_bias ? l.params[1].get() : nullptr, l.y, l.rows, l.in_features,
                l.out_features);
}

void linear_backward(const GpuLayer& l, Context& c) {
  dense_backward(c, l.x(), l.dy, l.params[0].get(), l.grads[0].get(), l.has_bias ? l.grads[1].get() : nullptr,
                 l.dx(), l.dx() != nullptr && l.accumulate[0], l.rows, l.in_features, l.out_features);
}

void conv_forward(const GpuLayer& l, Context& c) {
  const ConvPlan& p = l.conv;
  TRAINSIM_CUDNN(cudnnConvolutionForward(c.dnn, &kOne, p.x, l.x(), p.w, l.params[0].get(), p.conv, p.forward,
                                         c.workspace.get(), p.workspace_bytes, &kZero, p.y, l.y));
  if (l.has_bias) TRAINSIM_CUDNN(cudnnAddTensor(c.dnn, &kOne, p.bias, l.params[1].get(), &kOne, p.y, l.y));
}

void conv_backward(const GpuLayer& l, Context& c) {
  const ConvPlan& p = l.conv;
  TRAINSIM_CUDNN(cudnnConvolutionBackwardFilter(c.dnn, &kOne, p.x, l.x(), p.y, l.dy, p.conv, p.backward_filter,
                                                c.workspace.get(), p.workspace_bytes, &kOne, p.w, l.grads[0].get()));
  // The bias gradient: a sum over samples and positions per channel (the device's own kernel).
  if (l.has_bias) {
    add_channel_sums(l.dy, l.grads[1].get(), l.batch, l.out_shape[0], l.out_shape[1] * l.out_shape[2], c.stream);
  }
  if (l.dx() != nullptr) {
    TRAINSIM_CUDNN(cudnnConvolutionBackwardData(c.dnn, &kOne, p.w, l.params[0].get(), p.y, l.dy, p.conv,
                                                p.backward_data, c.workspace.get(), p.workspace_bytes, l.dx_beta(),
                                                p.x, l.dx()));
  }
}

// Training-mode batch normalization, the CPU kernel's epsilon (1e-5): the
// batch's mean and biased variance per channel, as exec/tensor/layers_norm.cpp
// takes them, kept for the backward (the device's own kernels: cuDNN's
// cudnnBatchNormalization* spread a channel over one block and took 10-25x
// longer at batch 1024, docs/results.md).
void plan_norm(GpuLayer& l) {
  NormPlan& p = l.norm;
  p.channels = l.in_shape[0];
  p.plane = l.in_shape.size() == 3 ? l.in_shape[1] * l.in_shape[2] : 1;
  p.mean = DeviceArray<float>(p.channels);
  p.inv_std = DeviceArray<float>(p.channels);
  p.variance = DeviceArray<float>(p.channels);
  p.scratch = DeviceArray<float>(norm_scratch_floats(l.batch, p.channels, p.plane));
}

void norm_forward(const GpuLayer& l, Context& c) {
  const NormPlan& p = l.norm;
  norm_forward_training(l.x(), l.y, l.params[0].get(), l.params[1].get(), p.mean.get(), p.inv_std.get(),
                        p.variance.get(), p.scratch.get(), l.batch, p.channels, p.plane, kNormEps, c.stream);
}

void norm_backward(const GpuLayer& l, Context& c) {
  const NormPlan& p = l.norm;
  norm_backward_training(l.x(), l.dy, l.params[0].get(), p.mean.get(), p.inv_std.get(), l.dx(), l.accumulate[0],
                         l.grads[0].get(), l.grads[1].get(), p.scratch.get(), l.batch, p.channels, p.plane,
                         c.stream);
}

}  // namespace

const float* GpuLayer::dx_beta() const { return accumulate[0] ? &kOne : &kZero; }

void dense_forward(Context& c, const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t in,
                   int64_t out) {
  const int m = static_cast<int>(out), n = static_cast<int>(rows), k = static_cast<int>(in);
  gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, w, k, x, k, &kZero, y, m);
  if (b != nullptr) add_row_bias(y, b, rows, out, c.stream);
}

void dense_backward(Context& c, const float* x, const float* dy, const float* w, float* dw, float* db, float* dx,
                    bool accumulate, int64_t rows, int64_t in, int64_t out) {
  const int i = static_cast<int>(in), o = static_cast<int>(out), n = static_cast<int>(rows);
  // dW (row-major {out, in}) += dyᵀ·x.
  gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, i, o, n, x, i, dy, o, &kOne, dw, i);
  // db += the column sums of dy (c.ones holds at least `rows` ones).
  if (db != nullptr) {
    TRAINSIM_CUBLAS(cublasSgemv(c.blas, CUBLAS_OP_N, o, n, &kOne, dy, o, c.ones.get(), 1, &kOne, db, 1));
  }
  // dx = dy·W.
  if (dx != nullptr) {
    gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, i, n, o, w, i, dy, o, accumulate ? &kOne : &kZero, dx, i);
  }
}

ConvPlan::~ConvPlan() {
  if (x != nullptr) cudnnDestroyTensorDescriptor(x);
  if (y != nullptr) cudnnDestroyTensorDescriptor(y);
  if (bias != nullptr) cudnnDestroyTensorDescriptor(bias);
  if (w != nullptr) cudnnDestroyFilterDescriptor(w);
  if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
}

size_t plan_layer(GpuLayer& l, const Layer& layer, Context& c) {
  l.op = op_of(layer, l.name + ".op");
  l.has_bias = l.params.size() > 1;
  if (l.op == Op::linear) {
    l.out_features = l.param_shapes[0][0];
    l.in_features = l.param_shapes[0][1];
    l.rows = l.in_count() / l.in_features;
    return 0;
  }
  if (l.op == Op::maxpool) {
    const WindowSpec& w = layer.window;
    l.pool = {l.batch * l.in_shape[0], l.in_shape[1], l.in_shape[2], l.out_shape[1], l.out_shape[2],
              w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w};
    if (l.in_count() > INT32_MAX) {  // its winners' positions are 32-bit
      throw InputError(l.name, std::to_string(l.in_count()) + " input values at a batch of " + std::to_string(l.batch),
                       "at most 2^31 - 1 values a max pooling's input on the GPU: a smaller batch");
    }
    l.argmax = DeviceArray<int32_t>(l.out_count());
    return 0;
  }
  if (l.op == Op::conv2d) return plan_conv(l, layer, c);
  if (l.op == Op::batchnorm) plan_norm(l);
  if (l.op == Op::lstm) plan_lstm(l);
  if (is_sequence_op(l.op)) plan_sequence(l, layer);
  return 0;
}

void forward(const GpuLayer& l, Context& c) {
  switch (l.op) {
    case Op::linear: return linear_forward(l, c);
    case Op::conv2d: return conv_forward(l, c);
    case Op::relu: return relu_forward(l.x(), l.y, l.out_count(), c.stream);
    case Op::maxpool: return maxpool_forward(l.x(), l.y, l.argmax.get(), l.pool, c.stream);
    case Op::batchnorm: return norm_forward(l, c);
    case Op::global_avgpool:
      return global_avgpool_forward(l.x(), l.y, l.out_count(), l.in_shape[1] * l.in_shape[2], c.stream);
    case Op::add: return add_forward(l.xs[0], l.xs[1], l.y, l.out_count(), c.stream);
    case Op::identity: return;
    case Op::lstm:
      return lstm_forward(l, c);
    default: return sequence_forward(l, c);
  }
}

void backward(const GpuLayer& l, Context& c) {
  switch (l.op) {
    case Op::linear: return linear_backward(l, c);
    case Op::conv2d: return conv_backward(l, c);
    case Op::relu:
      if (l.dx() != nullptr) relu_backward(l.y, l.dy, l.dx(), l.out_count(), l.accumulate[0], c.stream);
      return;
    case Op::maxpool:
      if (l.dx() != nullptr) maxpool_backward(l.dy, l.argmax.get(), l.dx(), l.pool, l.accumulate[0], c.stream);
      return;
    case Op::batchnorm: return norm_backward(l, c);
    case Op::global_avgpool:
      if (l.dx() != nullptr) {
        global_avgpool_backward(l.dy, l.dx(), l.out_count(), l.in_shape[1] * l.in_shape[2], l.accumulate[0],
                                c.stream);
      }
      return;
    case Op::add:
      for (size_t i = 0; i < l.dxs.size(); ++i) {
        if (l.dxs[i] != nullptr) pass_gradient(l.dy, l.dxs[i], l.out_count(), l.accumulate[i], c.stream);
      }
      return;
    case Op::identity: return;
    case Op::lstm:
      return lstm_backward(l, c);
    default: return sequence_backward(l, c);
  }
}

}  // namespace trainsim::cuda

namespace trainsim {

int64_t cuda_convolution_searches() { return cuda::conv_searches.load(); }

}  // namespace trainsim
