// CudaNetwork: the network's buffers, wired tensor to tensor, and the passes.
#include "exec/cuda/cuda_network.hpp"

#include <algorithm>
#include <cmath>

#include "exec/cuda/cuda_layer.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {

void check_token_ids(const NetworkState& s, const float* rows, int64_t count, int64_t tokens, int64_t stride) {
  for (const auto& l : s.layers) {
    if ((l->op != Op::embedding && l->op != Op::embedding_bag) || !l->computes || l->x() != s.input.get()) continue;
    const bool padding = l->op == Op::embedding_bag;  // a bag skips ids below 0
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t t = 0; t < tokens; ++t) {  // ids travel as floats, exact below 2^24
        const float id = rows[r * stride + t];
        if (padding && id < 0.0f) continue;
        if (!(id >= 0.0f && id < static_cast<float>(l->vocabulary)) || std::floor(id) != id) {
          throw InputError("set_batch: x[" + std::to_string(r) + "][" + std::to_string(t) + "]",
                           "token id " + std::to_string(id),
                           "an integer in [0, " + std::to_string(l->vocabulary) + ")" +
                               (padding ? " or a negative padding id" : "") + " for " + l->name);
        }
      }
    }
  }
}

void check_token_ids(const NetworkState& s, const Tensor& x) {
  if (x.size() > 0) check_token_ids(s, x.data.data(), x.rows(), x.row_size(), x.row_size());
}

namespace {

void select_device(int device, const std::string& flag = "--device", bool select = true) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (device < 0 || device >= count) {
    throw InputError(flag, "'cuda:" + std::to_string(device) + "' is not a GPU of this machine",
                     count == 0 ? std::string("a machine with a GPU and its driver")
                                : "cuda:0 to cuda:" + std::to_string(count - 1));
  }
  if (select) TRAINSIM_CUDA(cudaSetDevice(device));
}

// The tensors each layer reads, by index (-1: the model's input), from the
// model's names; InputError for a name that is not an earlier layer.
std::vector<std::vector<int32_t>> layer_inputs(const Model& model) {
  std::vector<std::vector<int32_t>> inputs(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    for (const std::string& name : model.layers[i].inputs) {
      int32_t t = -2;
      if (name == kModelInput) t = -1;
      for (size_t j = 0; j < i && t == -2; ++j) {
        if (model.layers[j].name == name) t = static_cast<int32_t>(j);
      }
      if (t == -2) {
        throw InputError(model.name + ": " + model.layers[i].name + ".inputs", "'" + name + "' is not an earlier layer",
                         "the input or a layer before it");
      }
      inputs[i].push_back(t);
    }
  }
  return inputs;
}

const std::vector<int64_t>& tensor_shape(const Model& model, int32_t t) {
  return t < 0 ? model.input_shape : model.layers[static_cast<size_t>(t)].output_shape;
}

// What a network holds of each layer and tensor.
struct Holding {
  std::vector<uint8_t> computes;  // per layer
  std::vector<uint8_t> values;    // per tensor + 1: a buffer for its values (or its root's, an identity's)
  bool steps = true;              // velocities held
};

// Builds layer i's buffers and plan; `xs` are what it reads. A layer the
// network does not compute gets neither, and its output a buffer only where
// `holding` keeps its values.
std::unique_ptr<GpuLayer> make_layer(const Model& model, size_t i, const std::vector<int32_t>& inputs,
                                     const LayerParams& params, int64_t batch, std::vector<const float*> xs,
                                     Context& context, size_t& workspace, const Holding& holding) {
  const Layer& layer = model.layers[i];
  auto l = std::make_unique<GpuLayer>();
  l->name = model.name + ": " + layer.name;
  l->in_shape = tensor_shape(model, inputs[0]);
  l->out_shape = layer.output_shape;
  l->batch = batch;
  l->computes = holding.computes[i] != 0;
  for (const Tensor& p : params) l->param_shapes.push_back(p.shape);
  if (l->computes) {
    for (const Tensor& p : params) {
      l->params.emplace_back(p.size());
      upload(l->params.back().get(), p, context.stream);
      l->grads.emplace_back(p.size());
      TRAINSIM_CUDA(cudaMemsetAsync(l->grads.back().get(), 0, l->grads.back().bytes(), context.stream));
      if (!holding.steps) continue;
      l->velocity.emplace_back(p.size());
      TRAINSIM_CUDA(cudaMemsetAsync(l->velocity.back().get(), 0, l->velocity.back().bytes(), context.stream));
    }
    workspace = std::max(workspace, plan_layer(*l, layer, context));
  } else {
    l->op = op_of(layer, l->name + ".op");
  }
  l->xs = std::move(xs);
  if (l->op == Op::identity) {
    l->y = const_cast<float*>(l->xs[0]);  // the layer's output is its input
  } else if (holding.values[i + 1] != 0) {
    l->own_y = DeviceArray<float>(l->out_count());
    l->y = l->own_y.get();
  }
  return l;
}

// What the network holds (everything without `held`): an identity's output
// is its input's buffer, so a tensor held holds its root's too.
Holding holding_of(const Model& model, const std::vector<std::vector<int32_t>>& inputs, const HeldLayers* held,
                   bool steps) {
  const size_t n = model.layers.size();
  Holding h{std::vector<uint8_t>(n, 1), std::vector<uint8_t>(n + 1, 1), steps};
  if (held == nullptr) return h;
  TRAINSIM_CHECK(held->computes.size() == n && held->tensors.size() == n + 1 && held->cuts.size() == n + 1,
                 "held layers of another model");
  h.computes = held->computes;
  h.values = held->tensors;
  for (size_t i = n; i-- > 0;) {
    if (h.values[i + 1] != 0 && op_of(model.layers[i], model.name + ".op") == Op::identity) {
      h.values[static_cast<size_t>(inputs[i][0]) + 1] = 1;
    }
  }
  return h;
}

// Where each gradient lives and who writes it. Tensors an identity layer
// passes on share one gradient, that of their root; the loss writes the
// last layer's; each layer's backward writes or adds into the gradients of
// what it reads, the first to run (the last reader) writing. Unless
// `input_gradient`, tensors made before the first layer with parameters get
// none: nothing reads them; the model's input (and what an identity passes
// on of it) gets one only with `model_input_gradient` too.
// A layer the network does not compute reads and writes no gradient; its
// output's gradient has a buffer only where `holding` keeps its values (a
// cut's tensor a range carries), though the layers after it still count
// its writes, so that a range's layers add into what the cut brings.
void wire_gradients(NetworkState& s, const Model& model, bool input_gradient, bool model_input_gradient,
                    const Holding& holding) {
  const auto count = static_cast<int32_t>(s.layers.size());
  int32_t first_with_params = count;
  for (int32_t i = 0; i < count && first_with_params == count; ++i) {
    if (!s.layers[static_cast<size_t>(i)]->params.empty()) first_with_params = i;
  }
  std::vector<int32_t> root(static_cast<size_t>(count) + 1);  // per tensor + 1
  root[0] = -1;
  for (int32_t i = 0; i < count; ++i) {
    const bool identity = s.layers[static_cast<size_t>(i)]->op == Op::identity;
    root[static_cast<size_t>(i) + 1] = identity ? root[static_cast<size_t>(s.inputs[static_cast<size_t>(i)][0]) + 1] : i;
  }
  const auto needs = [&](int32_t t) {
    const int32_t r = root[static_cast<size_t>(t) + 1];
    return r >= first_with_params || (input_gradient && (r >= 0 || model_input_gradient));
  };
  s.grad_buffers.clear();
  s.grad_buffers.resize(static_cast<size_t>(count) + 1);
  std::vector<float*> grad(static_cast<size_t>(count) + 1, nullptr);  // per root + 1
  std::vector<bool> written(static_cast<size_t>(count) + 1, false);
  const int32_t last_root = root[static_cast<size_t>(count)];
  grad[static_cast<size_t>(last_root) + 1] = s.dlogits.get();  // where held; else a buffer of its own where needed
  written[static_cast<size_t>(last_root) + 1] = true;
  const auto buffer_of = [&](int32_t r) {
    float*& g = grad[static_cast<size_t>(r) + 1];
    if (g == nullptr) {
      s.grad_buffers[static_cast<size_t>(r) + 1] = DeviceArray<float>(s.batch * element_count(tensor_shape(model, r)));
      g = s.grad_buffers[static_cast<size_t>(r) + 1].get();
    }
    return g;
  };
  for (int32_t i = count; i-- > 0;) {
    GpuLayer& l = *s.layers[static_cast<size_t>(i)];
    const std::vector<int32_t>& in = s.inputs[static_cast<size_t>(i)];
    l.dy = needs(i) && holding.values[static_cast<size_t>(i) + 1] != 0 ? buffer_of(root[static_cast<size_t>(i) + 1])
                                                                       : nullptr;
    l.dxs.assign(in.size(), nullptr);
    l.accumulate.assign(in.size(), false);
    for (size_t k = 0; k < in.size(); ++k) {
      const int32_t r = root[static_cast<size_t>(in[k]) + 1];
      if (!needs(in[k])) continue;
      if (l.computes) l.dxs[k] = buffer_of(r);
      if (l.op == Op::identity) continue;  // shares its output's gradient, writes nothing
      l.accumulate[k] = written[static_cast<size_t>(r) + 1];
      written[static_cast<size_t>(r) + 1] = true;
    }
  }
}

}  // namespace
}  // namespace cuda

using cuda::NetworkState;

void check_cuda_device(const Model& model, int gpu, const std::string& flag, bool select) {
  cuda::layer_inputs(model);
  for (const Layer& layer : model.layers) cuda::op_of(layer, model.name + ": " + layer.name + ".op");
  cuda::select_device(gpu, flag, select);
}

CudaNetwork::CudaNetwork(const Model& model, const Weights& weights, int64_t batch, int device,
                         const CudaNetworkOptions& options)
    : state_(std::make_unique<NetworkState>()) {
  const ChargeTo charge(options.budget);  // every array made below
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  TRAINSIM_CHECK(weights.size() == model.layers.size() && !model.layers.empty(), "weights of every layer");
  std::vector<std::vector<int32_t>> inputs = cuda::layer_inputs(model);  // checked before the GPU is touched
  for (size_t i = 0; i < model.layers.size(); ++i) {
    cuda::op_of(model.layers[i], model.name + ": " + model.layers[i].name + ".op");
  }
  cuda::select_device(device);
  NetworkState& s = *state_;
  cuda::Context& c = s.context;
  c.device = device;
  c.exact = options.precision == CudaPrecision::exact;
  c.tf32 = options.precision == CudaPrecision::tf32 || options.precision == CudaPrecision::bf16;
  c.bf16 = options.precision == CudaPrecision::bf16;
  cudaDeviceProp prop{};
  TRAINSIM_CUDA(cudaGetDeviceProperties(&prop, device));
  s.device_name = prop.name;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  TRAINSIM_CUBLAS(cublasCreate(&c.blas));
  TRAINSIM_CUBLAS(cublasSetStream(c.blas, c.stream));
  TRAINSIM_CUBLAS(cublasSetMathMode(c.blas, c.tf32    ? CUBLAS_TF32_TENSOR_OP_MATH
                                            : c.exact ? CUBLAS_PEDANTIC_MATH
                                                      : CUBLAS_DEFAULT_MATH));  // fp32, no TF32
  // cuBLAS's workspace its own buffer, so a captured LSTM pass finds it made
  // (cuBLAS's advice for cublasSetWorkspace: 32 MiB from Hopper on, 4 MiB before).
  c.blas_workspace = cuda::DeviceArray<char>(prop.major >= 9 ? int64_t{32} << 20 : int64_t{4} << 20);
  TRAINSIM_CUBLAS(cublasSetWorkspace(c.blas, c.blas_workspace.get(), c.blas_workspace.bytes()));
  TRAINSIM_CUDNN(cudnnCreate(&c.dnn));
  TRAINSIM_CUDNN(cudnnSetStream(c.dnn, c.stream));
  s.batch = batch;
  const cuda::Holding holding = cuda::holding_of(model, inputs, options.held.get(), options.steps);
  if (options.held != nullptr && !options.held->every_layer()) s.cuts = options.held->cuts;
  s.steps = options.steps;
  TRAINSIM_CHECK(options.held == nullptr || options.input_gradient, "a stage's GPU network without input gradients");
  // The model's input and the loss's buffers only where the ranges read
  // them (a later stage holds neither; a language model's dlogits are
  // batch x positions x vocabulary).
  if (holding.values[0] != 0) s.input = cuda::DeviceArray<float>(batch * element_count(model.input_shape));
  size_t workspace = 0;
  s.inputs = std::move(inputs);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    std::vector<const float*> xs;
    for (const int32_t t : s.inputs[i]) xs.push_back(t < 0 ? s.input.get() : s.layers[static_cast<size_t>(t)]->y);
    s.layers.push_back(
        cuda::make_layer(model, i, s.inputs[i], weights[i], batch, std::move(xs), c, workspace, holding));
  }
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  s.classes = out.empty() ? 1 : out.back();
  s.positions = batch * element_count(out) / std::max<int64_t>(1, s.classes);
  if (holding.computes.back() != 0) {
    s.loss = cuda::DeviceArray<float>(s.positions);
    s.dlogits = cuda::DeviceArray<float>(s.positions * s.classes);
    s.labels = cuda::DeviceArray<int32_t>(s.positions);
  }
  c.workspace = cuda::DeviceArray<char>(static_cast<int64_t>(workspace));
  int64_t widest = 1;
  for (const auto& l : s.layers) widest = std::max(widest, l->rows);
  std::vector<float> ones(static_cast<size_t>(widest), 1.0f);
  c.ones = cuda::DeviceArray<float>(widest);
  // On the network's stream (not the default one, which the network's
  // stream does not wait for): the synchronization below covers it.
  TRAINSIM_CUDA(cudaMemcpyAsync(c.ones.get(), ones.data(), c.ones.bytes(), cudaMemcpyHostToDevice, c.stream));
  cuda::wire_gradients(s, model, options.input_gradient, options.model_input_gradient, holding);
  s.events.resize(3 * s.layers.size() + 1);
  for (cudaEvent_t& e : s.events) TRAINSIM_CUDA(cudaEventCreate(&e));
  TRAINSIM_CUDA(cudaStreamSynchronize(c.stream));
}

CudaNetwork::~CudaNetwork() = default;

std::string CudaNetwork::device_name() const { return state_->device_name; }

int64_t CudaNetwork::captured_passes() const {
  int64_t captured = 0;
  for (const auto& l : state_->layers) {
    captured += (l->lstm.forward_graph.exec != nullptr) + (l->lstm.backward_graph.exec != nullptr);
  }
  return captured;
}
int64_t CudaNetwork::batch() const { return state_->batch; }

void CudaNetwork::set_batch(const Tensor& x, std::span<const int32_t> labels) {
  NetworkState& s = *state_;
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));  // the calling thread may have another GPU current
  TRAINSIM_CHECK(s.cuts.empty(), "a whole pass's batch for a GPU network holding some layers alone");
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
  cuda::check_token_ids(s, x);
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
      softmax_cross_entropy(s.layers.back()->y, s.labels.get(), s.positions, s.classes, s.loss.get(), s.dlogits.get(),
                            1.0f, s.context.stream);
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

// A layer's parameters stepped and their gradients zeroed in one launch
// (an embedding bag's touched rows alone).
void run_update(NetworkState& s, const SgdOptions& sgd, size_t* next) {
  std::vector<SgdTensor> params;
  for (const auto& l : s.layers) {
    if (l->op == Op::embedding_bag) {  // the rows its gradient touched, as Sgd's sparse step
      step_touched_rows(*l, static_cast<float>(sgd.learning_rate), static_cast<float>(sgd.momentum),
                        static_cast<float>(sgd.weight_decay), s.context);
      mark(s, next);
      continue;
    }
    params.clear();
    for (size_t p = 0; p < l->params.size(); ++p) {
      params.push_back(SgdTensor{l->params[p].get(), l->grads[p].get(), l->velocity[p].get(), l->params[p].size()});
    }
    sgd_step_all(params.data(), static_cast<int64_t>(params.size()), static_cast<float>(sgd.learning_rate),
                 static_cast<float>(sgd.momentum), static_cast<float>(sgd.weight_decay), /*zero_gradients=*/true,
                 s.context.stream);
    mark(s, next);
  }
  TRAINSIM_CUDA(cudaGetLastError());
}

// A whole pass needs every layer and, to step, the velocities.
void check_whole(const NetworkState& s, bool step) {
  TRAINSIM_CHECK(s.cuts.empty(), "a whole pass of a GPU network holding some layers alone");
  TRAINSIM_CHECK(!step || s.steps, "a step of a GPU network built without its velocities");
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
  cuda::check_whole(s, false);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  cuda::run_forward(s, nullptr);
  return cuda::mean_loss(s);
}

void CudaNetwork::backward() {
  cuda::check_whole(*state_, false);
  TRAINSIM_CUDA(cudaSetDevice(state_->context.device));
  cuda::run_backward(*state_, nullptr);
  TRAINSIM_CUDA(cudaStreamSynchronize(state_->context.stream));
}

void CudaNetwork::update(const SgdOptions& sgd) {
  cuda::check_whole(*state_, true);
  TRAINSIM_CUDA(cudaSetDevice(state_->context.device));
  cuda::run_update(*state_, sgd, nullptr);
  TRAINSIM_CUDA(cudaStreamSynchronize(state_->context.stream));
}

GpuPassTimes CudaNetwork::timed_pass(const SgdOptions& sgd) {
  NetworkState& s = *state_;
  cuda::check_whole(s, true);
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));  // the calling thread may be any
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

}  // namespace trainsim
