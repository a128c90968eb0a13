// A model's layer graph on one GPU: device memory for the weights,
// their gradients and velocities, every layer's output and input gradient,
// and one training pass (forward, softmax cross-entropy, backward,
// momentum SGD) on one CUDA stream. The GPU profiler times its layers with
// CUDA events; the conformance tests compare it with exec's CPU kernels.
// No CUDA type appears here, so any C++ file may include it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/held_layers.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "exec/tensor/range_network.hpp"
#include "exec/tensor/tensor.hpp"
#include "model/layer.hpp"

namespace trainsim {

namespace cuda {
struct NetworkState;
}

// How the GPU device computes its fp32 tensors' products:
// `fast` lets cuDNN use any fp32 convolution algorithm, FFT and Winograd
// transforms included (what PyTorch's cudnn.benchmark picks from with TF32
// off), whose rounding reaches about 1e-3 relative, and cuBLAS its default
// fp32 math (PyTorch's with TF32 off); `exact` keeps to the
// algorithms that sum plain fp32 products (implicit and explicit GEMM,
// direct) and cuBLAS to its pedantic math, within 1e-4 of the CPU
// reference (the conformance tests);
// `tf32` lets cuBLAS and cuDNN round the products' inputs to TF32 (10-bit
// mantissa) on the tensor cores, as PyTorch's allow_tf32, storage and sums
// staying fp32; `bf16` rounds cuBLAS's products' inputs to bfloat16 (7-bit
// mantissa) before each product, which sums them in fp32 on the tensor
// cores, cuDNN's convolutions as under tf32, storage fp32. The device's
// own kernels compute in fp32 under all four.
enum class CudaPrecision { fast, exact, tf32, bf16 };

struct CudaNetworkOptions {
  CudaPrecision precision = CudaPrecision::fast;
  // Also the gradients of the tensors made before the first layer with
  // parameters, as a pipeline stage after the first needs its input's;
  // without it, layers up to the first with parameters compute none.
  bool input_gradient = false;
  // With input_gradient, dL/d(the model's input) too (each layer's alone,
  // against the CPU's); a worker's stages never send it anywhere.
  bool model_input_gradient = true;
  // The layers a worker's range passes compute and the tensors they read,
  // write or carry across their boundaries (exec/tensor/held_layers.hpp):
  // the network holds parameters, gradients and plans for those layers
  // and buffers for those tensors alone, and refuses a range or cut
  // outside them. None: the whole model.
  std::shared_ptr<const HeldLayers> held = nullptr;
  // Whether it steps its own weights (update, timed_pass); without, it
  // holds no velocity (a worker's device steps in its store).
  bool steps = true;
  // What its device arrays take charges this (a virtual worker's share of
  // the GPU, memory_budget.hpp): MemoryBudgetExceeded past it.
  std::shared_ptr<MemoryBudget> budget = nullptr;
};

// Per layer, seconds measured with CUDA events around its kernels.
struct GpuPassTimes {
  std::vector<double> forward_s, backward_s, update_s;
  double step_s = 0;  // the whole pass, from before the first kernel to after the last
};

// How many convolution shapes this process has searched cuDNN's algorithms
// for: a network of a shape searched before (on that GPU, under that
// precision) takes the algorithms chosen then.
int64_t cuda_convolution_searches();

// Before any GPU memory is taken: every layer of `model` has a GPU kernel
// (InputError naming the layer), and GPU `gpu` answers (InputError naming
// `flag` for an index the driver does not have or a build without CUDA).
// With `select`, the GPU also becomes the calling thread's, which makes its
// context (hundreds of MB of its memory); a process that only starts
// others (the MPI launcher) checks without.
void check_cuda_device(const Model& model, int gpu, const std::string& flag, bool select = true);

class CudaNetwork final : public RangeNetwork {
 public:
  // `model` (linear, conv2d, batchnorm, relu, maxpool, global avgpool, add
  // of two, flatten, dropout, softmax, dense embedding, embedding bag,
  // positional encoding, layernorm, gelu, self-attention and LSTM layers,
  // over its layer graph) on GPU `device` at `batch` samples, starting from
  // `weights` (as init_weights lays them out). InputError naming the layer for another op
  // or an input that is not an earlier layer; InputError naming --device for a device index the driver does not have
  // or a build without CUDA; CudaError when the GPU refuses (out of memory).
  CudaNetwork(const Model& model, const Weights& weights, int64_t batch, int device,
              const CudaNetworkOptions& options = {});
  ~CudaNetwork() override;
  CudaNetwork(const CudaNetwork&) = delete;
  CudaNetwork& operator=(const CudaNetwork&) = delete;

  // The GPU's name, as the driver reports it.
  std::string device_name() const;
  // The layer passes launched as CUDA graphs (an LSTM's forward and
  // backward each, from their second run; none where capturing failed).
  int64_t captured_passes() const;
  int64_t batch() const override;

  // Copies a batch ({batch, input...}) and its labels (one per output
  // position) to the GPU, where they stay for the passes that follow.
  void set_batch(const Tensor& x, std::span<const int32_t> labels);

  // Every layer forward, then the loss and dL/dlogits; returns the mean loss.
  double forward_and_loss();
  // Every layer backward, adding into the gradients (dL/d(input) of the
  // layers up to the first with parameters only with options.input_gradient).
  void backward();
  // One momentum-SGD step of every parameter, then its gradient zeroed.
  void update(const SgdOptions& sgd);

  // One whole pass (forward with the loss, backward, update) with every
  // layer's kernels between two CUDA events, and no host synchronization
  // but one at the end to read them.
  GpuPassTimes timed_pass(const SgdOptions& sgd);

  // The interpreter's passes over layer ranges (RangeNetwork,
  // exec/tensor/range_network.hpp; cuda_network_range.cpp), on the
  // network's stream, the network built with options.input_gradient (and,
  // for a worker's passes, options.held: a range or cut outside it is a
  // TRAINSIM_CHECK): the weights from the host; a boundary's tensors
  // uploaded into and brought back from the buffers of the model's graph
  // that the ranges hold; the loss computed on
  // the GPU and read when the host first asks (waiting for its copy
  // alone); the parameter gradients added into the sums the GPU device
  // keeps (cuda_device_store.hpp), or downloaded and added into the host's;
  // a boundary for (or from) a network of another worker on this GPU
  // copied device to device through an array of that device's store.
  void load_weights(const Weights& weights, int64_t first, int64_t last) override;
  void load_layers(const Weights& weights, std::span<const int64_t> layers) override;
  void forward_range(const Network& network, int64_t first, int64_t last, const Tensor* x) override;
  PendingLoss forward_range_loss(const Network& network, int64_t first, int64_t last, const Tensor* x,
                                 std::span<const int32_t> labels, float dlogits_scale) override;
  std::vector<std::vector<Tensor>> batch_statistics(int64_t first, int64_t last) const override;
  void backward_range(const Network& network, int64_t first, int64_t last, const Tensor* dy, Gradients& grads) override;
  void load_kept_weights(int64_t layer, std::span<KeptValues* const> params) override;
  void fold_statistics(int64_t layer, KeptValues& running_mean, KeptValues& running_variance) override;
  Tensor cut_values(const Network& network, int64_t i) override;
  Tensor cut_gradients(const Network& network, int64_t i) override;
  std::shared_ptr<KeptValues> export_cut(const Network& network, int64_t i, bool gradient, DeviceStore& store) override;
  // This network's stream waits for an event recorded on previous's (a
  // network of the same GPU).
  void queue_after(RangeNetwork& previous) override;
  // A CUDA event recorded on this network's stream; the stream's wait for
  // an exported input's array (cuda_work_mark.cpp).
  std::shared_ptr<WorkMark> mark() override;
  void wait_for(const Tensor& x) override;

  // Copies back, for tests and checks: a layer's output, dL/d(its input)
  // (where has_input_gradient), the gradients and the weights.
  Tensor output(int64_t layer) const;
  bool has_input_gradient(int64_t layer) const;
  Tensor input_gradient(int64_t layer) const;
  Gradients gradients() const;
  Weights weights() const;

 private:
  std::unique_ptr<cuda::NetworkState> state_;
};

}  // namespace trainsim
