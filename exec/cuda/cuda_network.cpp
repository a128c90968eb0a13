// CudaNetwork: the chain's buffers, wired layer to layer, and the passes.
#include "exec/cuda/cuda_network.hpp"

#include <algorithm>

#include "exec/cuda/cuda_layer.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {

struct NetworkState {
  Context context;
  std::vector<std::unique_ptr<GpuLayer>> layers;
  std::string device_name;
  int64_t batch = 0;
  int64_t positions = 0, classes = 0;  // of the loss
  DeviceArray<float> input, loss, dlogits;
  DeviceArray<int32_t> labels;
  std::vector<cudaEvent_t> events;  // one before the pass, then one after each timed piece

  ~NetworkState() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (context.dnn != nullptr) cudnnDestroy(context.dnn);
    if (context.blas != nullptr) cublasDestroy(context.blas);
    if (context.stream != nullptr) cudaStreamDestroy(context.stream);
  }
};

namespace {

void select_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (device < 0 || device >= count) {
    throw InputError("--device", "'cuda:" + std::to_string(device) + "' is not a GPU of this machine",
                     count == 0 ? std::string("a machine with a GPU and its driver")
                                : "cuda:0 to cuda:" + std::to_string(count - 1));
  }
  TRAINSIM_CUDA(cudaSetDevice(device));
}

void upload(float* to, const Tensor& from, cudaStream_t stream) {
  TRAINSIM_CUDA(cudaMemcpyAsync(to, from.data.data(), sizeof(float) * from.data.size(), cudaMemcpyHostToDevice, stream));
}

Tensor download(const float* from, std::vector<int64_t> shape, cudaStream_t stream) {
  Tensor t(std::move(shape));
  TRAINSIM_CUDA(cudaMemcpyAsync(t.data.data(), from, sizeof(float) * t.data.size(), cudaMemcpyDeviceToHost, stream));
  TRAINSIM_CUDA(cudaStreamSynchronize(stream));
  return t;
}

std::vector<int64_t> batched(int64_t batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out{batch};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

void check_chain(const Model& model, size_t i) {
  const std::string expected = i == 0 ? std::string(kModelInput) : model.layers[i - 1].name;
  const Layer& layer = model.layers[i];
  if (layer.inputs.size() != 1 || layer.inputs[0] != expected) {
    throw InputError(model.name + ": " + layer.name + ".inputs", "do not read only the layer before it",
                     "a chain of layers (the GPU device runs no residual or concatenating graph yet)");
  }
}

// Builds layer i's buffers and plan; `x` is what it reads.
std::unique_ptr<GpuLayer> make_layer(const Model& model, size_t i, const LayerParams& params, int64_t batch,
                                     const float* x, Context& context, size_t& workspace) {
  const Layer& layer = model.layers[i];
  auto l = std::make_unique<GpuLayer>();
  l->name = model.name + ": " + layer.name;
  l->in_shape = i == 0 ? model.input_shape : model.layers[i - 1].output_shape;
  l->out_shape = layer.output_shape;
  l->batch = batch;
  for (const Tensor& p : params) {
    l->param_shapes.push_back(p.shape);
    l->params.emplace_back(p.size());
    upload(l->params.back().get(), p, context.stream);
    l->grads.emplace_back(p.size());
    TRAINSIM_CUDA(cudaMemsetAsync(l->grads.back().get(), 0, l->grads.back().bytes(), context.stream));
    l->velocity.emplace_back(p.size());
    TRAINSIM_CUDA(cudaMemsetAsync(l->velocity.back().get(), 0, l->velocity.back().bytes(), context.stream));
  }
  workspace = std::max(workspace, plan_layer(*l, layer, context));
  l->x = x;
  if (l->op == Op::identity) {
    l->y = const_cast<float*>(x);  // the layer's output is its input
  } else {
    l->own_y = DeviceArray<float>(l->out_count());
    l->y = l->own_y.get();
  }
  return l;
}

// dL/d(output) of each layer: the loss gradient for the last, else the
// next layer's dL/d(input); identity layers pass theirs through. Unless
// `input_gradient`, layers up to the first with parameters compute no
// dL/d(input): nothing reads it.
void wire_gradients(NetworkState& s, bool input_gradient) {
  int64_t first_with_params = static_cast<int64_t>(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (!s.layers[i]->params.empty()) {
      first_with_params = static_cast<int64_t>(i);
      break;
    }
  }
  if (input_gradient) first_with_params = -1;
  const float* dy = s.dlogits.get();
  for (size_t i = s.layers.size(); i-- > 0;) {
    GpuLayer& l = *s.layers[i];
    l.dy = dy;
    if (static_cast<int64_t>(i) <= first_with_params) {
      l.dx = nullptr;
    } else if (l.op == Op::identity) {
      l.dx = const_cast<float*>(dy);
    } else {
      l.own_dx = DeviceArray<float>(l.in_count());
      l.dx = l.own_dx.get();
    }
    dy = l.dx;
  }
}

}  // namespace
}  // namespace cuda

using cuda::NetworkState;

CudaNetwork::CudaNetwork(const Model& model, const Weights& weights, int64_t batch, int device,
                         const CudaNetworkOptions& options)
    : state_(std::make_unique<NetworkState>()) {
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  TRAINSIM_CHECK(weights.size() == model.layers.size() && !model.layers.empty(), "weights of every layer");
  for (size_t i = 0; i < model.layers.size(); ++i) {  // before the GPU is touched
    cuda::check_chain(model, i);
    cuda::op_of(model.layers[i], model.name + ": " + model.layers[i].name + ".op");
  }
  cuda::select_device(device);
  NetworkState& s = *state_;
  cuda::Context& c = s.context;
  c.device = device;
  c.exact = options.precision == CudaPrecision::exact;
  cudaDeviceProp prop{};
  TRAINSIM_CUDA(cudaGetDeviceProperties(&prop, device));
  s.device_name = prop.name;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  TRAINSIM_CUBLAS(cublasCreate(&c.blas));
  TRAINSIM_CUBLAS(cublasSetStream(c.blas, c.stream));
  TRAINSIM_CUBLAS(cublasSetMathMode(c.blas, CUBLAS_PEDANTIC_MATH));  // fp32, no TF32
  TRAINSIM_CUDNN(cudnnCreate(&c.dnn));
  TRAINSIM_CUDNN(cudnnSetStream(c.dnn, c.stream));
  s.batch = batch;
  s.input = cuda::DeviceArray<float>(batch * element_count(model.input_shape));
  size_t workspace = 0;
  const float* x = s.input.get();
  for (size_t i = 0; i < model.layers.size(); ++i) {
    s.layers.push_back(cuda::make_layer(model, i, weights[i], batch, x, c, workspace));
    x = s.layers.back()->y;
  }
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  s.classes = out.empty() ? 1 : out.back();
  s.positions = batch * element_count(out) / std::max<int64_t>(1, s.classes);
  s.loss = cuda::DeviceArray<float>(s.positions);
  s.dlogits = cuda::DeviceArray<float>(s.positions * s.classes);
  s.labels = cuda::DeviceArray<int32_t>(s.positions);
  c.workspace = cuda::DeviceArray<char>(static_cast<int64_t>(workspace));
  int64_t widest = 1;
  for (const auto& l : s.layers) widest = std::max(widest, l->rows);
  std::vector<float> ones(static_cast<size_t>(widest), 1.0f);
  c.ones = cuda::DeviceArray<float>(widest);
  TRAINSIM_CUDA(cudaMemcpy(c.ones.get(), ones.data(), c.ones.bytes(), cudaMemcpyHostToDevice));
  cuda::wire_gradients(s, options.input_gradient);
  s.events.resize(3 * s.layers.size() + 1);
  for (cudaEvent_t& e : s.events) TRAINSIM_CUDA(cudaEventCreate(&e));
  TRAINSIM_CUDA(cudaStreamSynchronize(c.stream));
}

CudaNetwork::~CudaNetwork() = default;

std::string CudaNetwork::device_name() const { return state_->device_name; }
int64_t CudaNetwork::batch() const { return state_->batch; }

void CudaNetwork::set_batch(const Tensor& x, std::span<const int32_t> labels) {
  NetworkState& s = *state_;
  if (x.size() != s.input.size()) {
    throw InputError("set_batch: x", std::to_string(x.size()) + " values", std::to_string(s.input.size()));
  }
  if (static_cast<int64_t>(labels.size()) != s.positions) {
    throw InputError("set_batch: labels", std::to_string(labels.size()), std::to_string(s.positions) + " labels");
  }
  for (const int32_t label : labels) {
    if (label < 0 || label >= s.classes) {
      throw InputError("set_batch: labels", "hold " + std::to_string(label), "classes in [0, " + std::to_string(s.classes) + ")");
    }
  }
  cuda::upload(s.input.get(), x, s.context.stream);
  TRAINSIM_CUDA(cudaMemcpyAsync(s.labels.get(), labels.data(), s.labels.bytes(), cudaMemcpyHostToDevice,
                                s.context.stream));
  TRAINSIM_CUDA(cudaStreamSynchronize(s.context.stream));
}

namespace cuda {
namespace {

// Records the next event when timing (`next` not null).
void mark(NetworkState& s, size_t* next) {
  if (next != nullptr) TRAINSIM_CUDA(cudaEventRecord(s.events[(*next)++], s.context.stream));
}

void run_forward(NetworkState& s, size_t* next) {
  for (size_t i = 0; i < s.layers.size(); ++i) {
    forward(*s.layers[i], s.context);
    if (i + 1 == s.layers.size()) {
      softmax_cross_entropy(s.layers.back()->y, s.labels.get(), s.positions, s.classes, s.loss.get(),
                            s.dlogits.get(), s.context.stream);
    }
    mark(s, next);
  }
  TRAINSIM_CUDA(cudaGetLastError());
}

void run_backward(NetworkState& s, size_t* next) {
  for (size_t i = s.layers.size(); i-- > 0;) {
    backward(*s.layers[i], s.context);
    mark(s, next);
  }
  TRAINSIM_CUDA(cudaGetLastError());
}

void run_update(NetworkState& s, const SgdOptions& sgd, size_t* next) {
  for (const auto& l : s.layers) {
    for (size_t p = 0; p < l->params.size(); ++p) {
      sgd_step(l->params[p].get(), l->grads[p].get(), l->velocity[p].get(), l->params[p].size(),
               static_cast<float>(sgd.learning_rate), static_cast<float>(sgd.momentum),
               static_cast<float>(sgd.weight_decay), s.context.stream);
      TRAINSIM_CUDA(cudaMemsetAsync(l->grads[p].get(), 0, l->grads[p].bytes(), s.context.stream));
    }
    mark(s, next);
  }
  TRAINSIM_CUDA(cudaGetLastError());
}

double elapsed_s(const NetworkState& s, size_t from) {
  float ms = 0;
  TRAINSIM_CUDA(cudaEventElapsedTime(&ms, s.events[from], s.events[from + 1]));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace
}  // namespace cuda

double CudaNetwork::forward_and_loss() {
  NetworkState& s = *state_;
  cuda::run_forward(s, nullptr);
  std::vector<float> losses(static_cast<size_t>(s.positions));
  TRAINSIM_CUDA(cudaMemcpyAsync(losses.data(), s.loss.get(), s.loss.bytes(), cudaMemcpyDeviceToHost, s.context.stream));
  TRAINSIM_CUDA(cudaStreamSynchronize(s.context.stream));
  double total = 0;
  for (const float v : losses) total += v;
  return s.positions > 0 ? total / static_cast<double>(s.positions) : 0.0;
}

void CudaNetwork::backward() {
  cuda::run_backward(*state_, nullptr);
  TRAINSIM_CUDA(cudaStreamSynchronize(state_->context.stream));
}

void CudaNetwork::update(const SgdOptions& sgd) {
  cuda::run_update(*state_, sgd, nullptr);
  TRAINSIM_CUDA(cudaStreamSynchronize(state_->context.stream));
}

GpuPassTimes CudaNetwork::timed_pass(const SgdOptions& sgd) {
  NetworkState& s = *state_;
  const size_t count = s.layers.size();
  size_t next = 0;
  cuda::mark(s, &next);
  cuda::run_forward(s, &next);
  cuda::run_backward(s, &next);
  cuda::run_update(s, sgd, &next);
  TRAINSIM_CUDA(cudaEventSynchronize(s.events.back()));
  GpuPassTimes t;
  float step_ms = 0;
  TRAINSIM_CUDA(cudaEventElapsedTime(&step_ms, s.events.front(), s.events.back()));
  t.step_s = static_cast<double>(step_ms) * 1e-3;
  t.forward_s.resize(count);
  t.backward_s.resize(count);
  t.update_s.resize(count);
  for (size_t i = 0; i < count; ++i) {
    t.forward_s[i] = cuda::elapsed_s(s, i);
    t.backward_s[count - 1 - i] = cuda::elapsed_s(s, count + i);
    t.update_s[i] = s.layers[i]->params.empty() ? 0.0 : cuda::elapsed_s(s, 2 * count + i);
  }
  return t;
}

Tensor CudaNetwork::output(int64_t layer) const {
  const NetworkState& s = *state_;
  TRAINSIM_CHECK(layer >= 0 && layer < static_cast<int64_t>(s.layers.size()), "a layer of the network");
  const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  return cuda::download(l.y, cuda::batched(s.batch, l.out_shape), s.context.stream);
}

bool CudaNetwork::has_input_gradient(int64_t layer) const {
  const NetworkState& s = *state_;
  return layer >= 0 && layer < static_cast<int64_t>(s.layers.size()) && s.layers[static_cast<size_t>(layer)]->dx != nullptr;
}

Tensor CudaNetwork::input_gradient(int64_t layer) const {
  const NetworkState& s = *state_;
  TRAINSIM_CHECK(has_input_gradient(layer), "a layer whose input gradient is computed");
  const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  return cuda::download(l.dx, cuda::batched(s.batch, l.in_shape), s.context.stream);
}

Gradients CudaNetwork::gradients() const {
  const NetworkState& s = *state_;
  Gradients out(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const cuda::GpuLayer& l = *s.layers[i];
    for (size_t p = 0; p < l.grads.size(); ++p) {
      ParamGrad g;
      g.dense = cuda::download(l.grads[p].get(), l.param_shapes[p], s.context.stream);
      out[i].push_back(std::move(g));
    }
  }
  return out;
}

Weights CudaNetwork::weights() const {
  const NetworkState& s = *state_;
  Weights out(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const cuda::GpuLayer& l = *s.layers[i];
    for (size_t p = 0; p < l.params.size(); ++p) {
      out[i].push_back(cuda::download(l.params[p].get(), l.param_shapes[p], s.context.stream));
    }
  }
  return out;
}

}  // namespace trainsim
