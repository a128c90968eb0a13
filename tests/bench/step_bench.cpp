// One training step of a single worker (forward, loss, backward, SGD update
// w -= lr·g) through the exec kernels (forward_range / backward_range) on
// fmnist-mlp and fmnist-cnn at batch 64 and fmnist-resnet20, fortunes-gpt and
// fortunes-lstm at 16, the same fmnist-mlp step written as a
// plain Eigen loop (three GEMMs forward, their transposes backward), and the
// plan interpreter running `single`'s plan of the same step (fmnist-mlp at 64;
// the residual fmnist-resnet20 and the decoder fortunes-gpt at 16), and the
// convolutions through oneDNN against im2col.
// CGDP's host sum of four workers' gradients (fmnist-cnn's 1.8 MB each) on
// one thread, on the kept host threads, and on threads started for the sum.
// The ratios are the kernels' and the interpreter's overheads. The kernel step
// and the plain loop must give the same loss from the same weights before
// anything is timed.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/optim/host_accumulate.hpp"
#include "exec/tensor/blas_threads.hpp"
#include "exec/tensor/conv_onednn.hpp"
#include "exec/tensor/kernels_impl.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/tensor/memory_reuse.hpp"
#include "exec/training.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

constexpr int64_t kBatch = 64;
constexpr float kLearningRate = 0.01f;
constexpr uint64_t kSeed = 1;

// A batch from a fixed seed: pixels in [0, 1), or token ids in [0, 256)
// for a model reading tokens; labels in [0, classes), one per position of
// the output (a sample's, or each token's for a language model).
struct Batch {
  Tensor x;
  std::vector<int32_t> labels;
};

Batch make_batch(const Network& network, int64_t rows = kBatch) {
  std::mt19937_64 rng(kSeed);
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), network.input_shape.begin(), network.input_shape.end());
  const int64_t classes = network.output_shapes.back().back();
  const int64_t positions = rows * element_count(network.output_shapes.back()) / classes;
  Batch batch{Tensor(shape), std::vector<int32_t>(static_cast<size_t>(positions))};
  const bool tokens = network.input_shape.size() == 1;
  for (float& v : batch.x.data) {
    v = tokens ? static_cast<float>(rng() % 256) : static_cast<float>(rng() >> 40) / 16777216.0f;
  }
  for (int32_t& label : batch.labels) label = static_cast<int32_t>(rng() % static_cast<uint64_t>(classes));
  return batch;
}

// The step through the network's kernels; returns the loss before the update.
struct NetworkStep {
  const Network& network;
  Weights weights;
  Gradients grads;
  std::vector<LayerCache> caches;

  explicit NetworkStep(const Network& n)
      : network(n), weights(init_weights(n, kSeed)), grads(zero_gradients(n, weights)) {}

  double run(const Batch& batch) { return step(batch.x, batch.labels); }
  // The step on an input it may take (as the interpreter's forward does).
  double run_taking(Tensor&& x, const std::vector<int32_t>& labels) { return step(std::move(x), labels); }

 private:
  template <typename Input>
  double step(Input&& x, const std::vector<int32_t>& labels) {
    const int64_t last = static_cast<int64_t>(network.layers.size()) - 1;
    Tensor dlogits;
    const double loss = softmax_cross_entropy(
        forward_range(network, weights, 0, last, std::forward<Input>(x), caches), labels, &dlogits);
    for (auto& layer : grads) {
      for (auto& grad : layer) std::fill(grad.dense.data.begin(), grad.dense.data.end(), 0.0f);
    }
    backward_range(network, weights, 0, last, dlogits, caches, grads);
    for (size_t i = 0; i < weights.size(); ++i) {
      for (size_t p = 0; p < weights[i].size(); ++p) {
        weights[i][p].matrix() -= kLearningRate * grads[i][p].dense.matrix();
      }
    }
    return loss;
  }
};

// fmnist-mlp (flatten, fc1 784->256, relu, fc2 256->128, relu, fc3 128->10) by hand.
struct EigenMlpStep {
  using Matrix = RowMajorMatrix;
  using Row = Eigen::RowVectorXf;
  Matrix w1, w2, w3;
  Row b1, b2, b3;
  bool input_grad = false;  // also compute dL/dx of the input, as backward_range returns it
  Matrix dx;

  EigenMlpStep(const Weights& weights, bool with_input_grad) : input_grad(with_input_grad) {
    // Layers of fmnist-mlp: 0 flatten, 1 fc1, 2 relu1, 3 fc2, 4 relu2, 5 fc3, 6 softmax.
    w1 = weights[1][0].matrix(), b1 = row_of(weights[1][1]);
    w2 = weights[3][0].matrix(), b2 = row_of(weights[3][1]);
    w3 = weights[5][0].matrix(), b3 = row_of(weights[5][1]);
  }

  static Row row_of(const Tensor& bias) { return Eigen::Map<const Row>(bias.data.data(), bias.size()); }

  double run(const Batch& batch) {
    const ConstMatrixView x(batch.x.data.data(), kBatch, batch.x.row_size());
    const Matrix h1 = ((x * w1.transpose()).rowwise() + b1).cwiseMax(0.0f);
    const Matrix h2 = ((h1 * w2.transpose()).rowwise() + b2).cwiseMax(0.0f);
    Matrix z = (h2 * w3.transpose()).rowwise() + b3;
    // Softmax cross-entropy, mean over the batch; z becomes dL/dz.
    double loss = 0.0;
    for (int64_t b = 0; b < kBatch; ++b) {
      const float max_z = z.row(b).maxCoeff();
      const Row e = (z.row(b).array() - max_z).exp().matrix();
      const double sum = e.sum();
      const int32_t label = batch.labels[b];
      loss += std::log(sum) + max_z - z(b, label);
      z.row(b) = (e / static_cast<float>(sum)) / static_cast<float>(kBatch);
      z(b, label) -= 1.0f / kBatch;
    }
    const Matrix dh2 = ((z * w3).array() * (h2.array() > 0.0f).cast<float>()).matrix();
    const Matrix dh1 = ((dh2 * w2).array() * (h1.array() > 0.0f).cast<float>()).matrix();
    if (input_grad) dx.noalias() = dh1 * w1;
    w3 -= kLearningRate * (z.transpose() * h2);
    b3 -= kLearningRate * z.colwise().sum();
    w2 -= kLearningRate * (dh2.transpose() * h1);
    b2 -= kLearningRate * dh2.colwise().sum();
    w1 -= kLearningRate * (dh1.transpose() * x);
    b1 -= kLearningRate * dh1.colwise().sum();
    return loss / kBatch;
  }
};

// Three steps each from the same weights: the losses must agree (the second
// and third also check the updates agree).
void check_same_losses(const Network& network, const Batch& batch) {
  NetworkStep kernels(network);
  EigenMlpStep by_hand(kernels.weights, false);
  for (int step = 0; step < 3; ++step) {
    const double a = kernels.run(batch), b = by_hand.run(batch);
    if (!(std::abs(a - b) <= 1e-5 * std::abs(b))) {
      std::fprintf(stderr, "step_bench: step %d loss %.9g (kernels) != %.9g (plain Eigen)\n", step, a, b);
      std::abort();
    }
  }
}

// One step through the kernels at `rows` a batch (tests/bench/peer_bench.py
// times PyTorch's step of the same model and batch beside it).
void BM_KernelStep(benchmark::State& state, const char* model, int64_t rows) {
  const Network network = build_network(build_zoo_model(model));
  const Batch batch = make_batch(network, rows);
  NetworkStep step(network);
  for (auto _ : state) benchmark::DoNotOptimize(step.run(batch));
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
}

// The three fmnist-mlp steps in each iteration, timed apart: the kernels, the
// plain loop, and the plain loop that also computes dL/dx of the input (a
// fourth backward GEMM, 784x256 per sample, that backward_range returns and
// the plain loop has no use for): their times and the ratios.
void BM_MlpKernelsVersusPlainEigen(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  const Batch batch = make_batch(network);
  check_same_losses(network, batch);
  NetworkStep kernels(network);
  EigenMlpStep by_hand(kernels.weights, false), by_hand_dx(kernels.weights, true);
  double kernels_s = 0.0, eigen_s = 0.0, eigen_dx_s = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(kernels.run(batch));
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(by_hand.run(batch));
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(by_hand_dx.run(batch));
    const auto t3 = Clock::now();
    kernels_s += std::chrono::duration<double>(t1 - t0).count();
    eigen_s += std::chrono::duration<double>(t2 - t1).count();
    eigen_dx_s += std::chrono::duration<double>(t3 - t2).count();
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["kernels_step_ms"] = 1e3 * kernels_s / steps;
  state.counters["eigen_step_ms"] = 1e3 * eigen_s / steps;
  state.counters["eigen_dx_step_ms"] = 1e3 * eigen_dx_s / steps;
  state.counters["kernels_over_eigen"] = eigen_s > 0 ? kernels_s / eigen_s : 0.0;
  state.counters["kernels_over_eigen_dx"] = eigen_dx_s > 0 ? kernels_s / eigen_dx_s : 0.0;
}

// The plan interpreter's overhead: `single`'s plan of `iterations` steps on
// `model` at `rows` a batch run by execute_plan (a compute thread running the
// plan's ops after their deps, the batch fetched per iteration, gradients
// kept per iteration, SGD without momentum), against as many kernel steps in
// a loop, timed apart in each iteration: their times per step and the ratio.
// Each step's batch is made before the timed run, for each side its own
// copies, and handed over: neither side pays for producing it, and neither
// reads one the step before left in cache; each pays for what it does with it.
void BM_InterpreterVersusKernels(benchmark::State& state, const char* model_id, int64_t rows, int32_t iterations) {
  using Clock = std::chrono::steady_clock;
  const Model model = build_zoo_model(model_id);
  const Network network = build_network(model);
  const Batch batch = make_batch(network, rows);
  const Cluster cluster = nominal_cpu_cluster(1);
  StrategyConfig config;
  const Plan plan = generate_plan(find_strategy("single", "bench"), analytic_profile(model, rows, cluster), cluster,
                                  config, iterations);
  std::vector<Tensor> made, made_for_loop;  // each step's batch, made before the timed run
  const BatchSource source = whole_batches([&](int32_t iteration, int64_t, Tensor& x, std::vector<int32_t>& y) {
    x = std::move(made.at(static_cast<size_t>(iteration)));
    y = batch.labels;
  });
  ExecOptions options;
  options.sgd = {kLearningRate, 0.0, 0.0};
  options.batch_size = rows;
  const Weights initial = init_weights(network, kSeed);
  NetworkStep kernels(network);
  double interpreter_s = 0.0, kernels_s = 0.0;
  for (auto _ : state) {
    made.assign(static_cast<size_t>(iterations), batch.x);
    made_for_loop.assign(static_cast<size_t>(iterations), batch.x);
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(execute_plan(plan, network, initial, source, options).loss_per_iteration.back());
    const auto t1 = Clock::now();
    for (int32_t i = 0; i < iterations; ++i) {
      benchmark::DoNotOptimize(kernels.run_taking(std::move(made_for_loop[static_cast<size_t>(i)]), batch.labels));
    }
    const auto t2 = Clock::now();
    interpreter_s += std::chrono::duration<double>(t1 - t0).count();
    kernels_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double steps = static_cast<double>(state.iterations()) * iterations;
  state.counters["interpreter_step_ms"] = 1e3 * interpreter_s / steps;
  state.counters["kernels_step_ms"] = 1e3 * kernels_s / steps;
  state.counters["interpreter_over_kernels"] = kernels_s > 0 ? interpreter_s / kernels_s : 0.0;
}

// Every convolution of `model` at `rows` a batch, forward then backward,
// through oneDNN's kernels and through im2col, timed apart in each
// iteration: the two totals per step and their ratio.
void BM_ConvKernels(benchmark::State& state, const char* model_id, int64_t rows) {
  using Clock = std::chrono::steady_clock;
  const Model model = build_zoo_model(model_id);
  const Network network = build_network(model);
  struct Conv {
    std::unique_ptr<ExecLayer> onednn, im2col;
    LayerParams params;
    Tensor x, dy;
  };
  std::vector<Conv> convs;
  std::mt19937_64 rng(kSeed);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    if (layer.op != "conv2d") continue;
    const int32_t input = network.inputs[i].front();
    std::vector<int64_t> in_shape = input < 0 ? network.input_shape : network.output_shapes[static_cast<size_t>(input)];
    std::string why;
    const Geometry g = make_geometry(in_shape, layer.window, false);
    if (OneDnnConv::make(g, layer.output_shape.front(), layer.bias, &why) == nullptr) {
      state.SkipWithError(("oneDNN: " + why).c_str());
      return;
    }
    Conv conv{make_conv2d(in_shape, layer.output_shape.front(), layer.window, layer.bias, Kernels::fastest),
              make_conv2d(in_shape, layer.output_shape.front(), layer.window, layer.bias, Kernels::reference),
              {}, {}, {}};
    conv.onednn->init_params(conv.params, rng);
    in_shape.insert(in_shape.begin(), rows);
    conv.x = Tensor(in_shape, 0.5f);
    std::vector<int64_t> out_shape = network.output_shapes[i];
    out_shape.insert(out_shape.begin(), rows);
    conv.dy = Tensor(out_shape, 0.25f);
    convs.push_back(std::move(conv));
  }
  auto pass = [&](Conv& conv, const ExecLayer& kernels) {
    LayerCache cache;
    LayerGrads grads(conv.params.size());
    for (size_t p = 0; p < conv.params.size(); ++p) grads[p].dense = Tensor(conv.params[p].shape);
    benchmark::DoNotOptimize(kernels.forward(conv.params, conv.x, cache));
    benchmark::DoNotOptimize(kernels.backward(conv.params, conv.dy, cache, grads));
  };
  double onednn_s = 0.0, im2col_s = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (Conv& conv : convs) pass(conv, *conv.onednn);
    const auto t1 = Clock::now();
    for (Conv& conv : convs) pass(conv, *conv.im2col);
    const auto t2 = Clock::now();
    onednn_s += std::chrono::duration<double>(t1 - t0).count();
    im2col_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["onednn_ms"] = 1e3 * onednn_s / steps;
  state.counters["im2col_ms"] = 1e3 * im2col_s / steps;
  state.counters["onednn_over_im2col"] = im2col_s > 0 ? onednn_s / im2col_s : 0.0;
}

// `threads` kept host threads summing (host_accumulate), or as many
// started for the sum and joined (the executor's way before they were kept).
void BM_HostSum(benchmark::State& state, bool kept) {
  const int64_t floats = 454922;  // fmnist-cnn's parameters
  std::vector<std::vector<float>> workers(4, std::vector<float>(static_cast<size_t>(floats), 0.5f));
  const std::vector<std::span<const float>> chunks(workers.begin(), workers.end());
  std::vector<float> sum(static_cast<size_t>(floats));
  const int64_t threads = state.range(0);
  for (auto _ : state) {
    if (kept) {
      host_accumulate(chunks, sum, threads, 0.25f);
    } else {
      std::vector<std::thread> started;
      for (int64_t t = 0; t < threads; ++t) {
        const auto [begin, end] = host_thread_range(floats, threads, t);
        started.emplace_back([&, b = static_cast<size_t>(begin), n = static_cast<size_t>(end - begin)] {
          const std::vector<std::span<const float>> part{chunks[0].subspan(b, n), chunks[1].subspan(b, n),
                                                         chunks[2].subspan(b, n), chunks[3].subspan(b, n)};
          host_accumulate(part, std::span<float>(sum).subspan(b, n), 1, 0.25f);
        });
      }
      for (std::thread& t : started) t.join();
    }
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetBytesProcessed(state.iterations() * 4 * floats * static_cast<int64_t>(sizeof(float)));
}

BENCHMARK_CAPTURE(BM_HostSum, kept, true)->DenseRange(1, 2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_HostSum, started, false)->DenseRange(1, 2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelStep, fmnist_mlp, "fmnist-mlp", kBatch)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelStep, fmnist_cnn, "fmnist-cnn", kBatch)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelStep, fmnist_resnet20, "fmnist-resnet20", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelStep, fortunes_gpt, "fortunes-gpt", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelStep, fortunes_lstm, "fortunes-lstm", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConvKernels, fmnist_cnn, "fmnist-cnn", kBatch)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConvKernels, fmnist_resnet20, "fmnist-resnet20", 16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpKernelsVersusPlainEigen)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InterpreterVersusKernels, fmnist_mlp, "fmnist-mlp", kBatch, 50)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InterpreterVersusKernels, fmnist_resnet20, "fmnist-resnet20", 16, 10)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InterpreterVersusKernels, fortunes_gpt, "fortunes-gpt", 16, 10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainsim

// The allocator policy `trainsim` runs under (tools/main.cpp).
int main(int argc, char** argv) {
  trainsim::reuse_freed_memory();
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("blas_kernels", trainsim::blas_kernels());
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
