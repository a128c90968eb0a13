// One training step on the GPU device (CudaNetwork::timed_pass: every
// forward with the loss, every backward, momentum SGD with the gradients
// zeroed) of fmnist-mlp, fmnist-cnn, fmnist-resnet20, fortunes-gpt and
// fortunes-lstm at batch 64 and 1024, timed by the CUDA events around the
// whole pass (manual time), in fp32 without TF32 (second argument 0) and
// with TF32 products (1).
// tests/gpu/gpu_check.py sets these figures beside PyTorch's eager step.
// Without a GPU each benchmark stops with the reason.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/devices.hpp"
#include "exec/tensor/layers.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

constexpr SgdOptions kSgd{1e-4, 0.9, 0.0};

void BM_CudaStep(benchmark::State& state, const std::string& model_name) {
  std::string reason;
  if (list_cuda_devices(reason).empty()) {
    state.SkipWithError(("no GPU: " + reason).c_str());
    return;
  }
  const int64_t batch = state.range(0);
  // range(1): 0 fp32, 1 TF32, 2 bf16 products.
  const CudaPrecision precision = state.range(1) == 1   ? CudaPrecision::tf32
                                  : state.range(1) == 2 ? CudaPrecision::bf16
                                                        : CudaPrecision::fast;
  const Model model = build_zoo_model(model_name);
  const Network network = build_network(model);
  CudaNetwork gpu(model, init_weights(network, 1), batch, 0, {precision, false});
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  Tensor x(shape);
  const Layer& first = model.layers.front();
  for (float& v : x.data) {  // token ids where the model starts with an embedding, else pixels
    v = first.op == "embedding" ? static_cast<float>(rng() % static_cast<uint64_t>(first.sparse_rows)) : pixel(rng);
  }
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  const int64_t positions = batch * element_count(out) / out.back();
  gpu.set_batch(x, std::vector<int32_t>(static_cast<size_t>(positions), 0));
  for (int i = 0; i < 10; ++i) gpu.timed_pass(kSgd);  // warm-up: cuDNN, caches, clocks
  for (auto _ : state) state.SetIterationTime(gpu.timed_pass(kSgd).step_s);
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(gpu.device_name() + (precision == CudaPrecision::tf32   ? ", TF32"
                                      : precision == CudaPrecision::bf16 ? ", BF16 products"
                                                                         : ", fp32"));
}

BENCHMARK_CAPTURE(BM_CudaStep, fmnist_mlp, std::string("fmnist-mlp"))
    ->ArgsProduct({{64, 1024}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CudaStep, fmnist_cnn, std::string("fmnist-cnn"))
    ->ArgsProduct({{64, 1024}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CudaStep, fmnist_resnet20, std::string("fmnist-resnet20"))
    ->ArgsProduct({{64, 1024}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CudaStep, fortunes_gpt, std::string("fortunes-gpt"))
    ->ArgsProduct({{64, 1024}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CudaStep, fortunes_lstm, std::string("fortunes-lstm"))
    ->ArgsProduct({{64, 1024}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace trainsim

BENCHMARK_MAIN();
