// Conformance of the GPU device with exec's CPU kernels, the reference: the
// same weights and batch give every layer's output, every input gradient,
// the parameter gradients and two momentum-SGD steps within a relative
// error of 1e-4 (CudaPrecision::exact: fp32, no TF32, no FFT or Winograd
// convolutions), and within 1e-2 with the fast algorithms. Labelled gpu;
// skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "exec/cuda/cuda_network.hpp"
#include "exec/devices.hpp"
#include "exec/tensor/layers.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"

namespace trainsim {
namespace {

constexpr double kExactTolerance = 1e-4;
constexpr double kFastTolerance = 1e-2;

#define SKIP_WITHOUT_GPU()                                   \
  do {                                                       \
    std::string reason;                                      \
    if (list_cuda_devices(reason).empty()) {                 \
      GTEST_SKIP() << "GPU test skipped: " << reason;        \
    }                                                        \
  } while (false)

// ‖a − b‖₂ / ‖b‖₂ (0 when both are zero).
double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += std::pow(double{a.data[i]} - b.data[i], 2);
    norm += std::pow(double{b.data[i]}, 2);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Strides, padding, ceil-mode pooling, groups and a layer without bias.
Model mixed_cnn() {
  ModelBuilder b("mixed-cnn", "test", {3, 13, 13}, 8);
  std::string x = b.relu("relu1", b.conv2d("conv1", kModelInput, conv(8, 3, 2, 1)));
  x = b.maxpool("pool1", x, pool(3, 2, 1, true));
  ConvSpec grouped = conv(6, 3, 1, 1, false);
  grouped.groups = 2;
  x = b.relu("relu2", b.conv2d("conv2", x, grouped));
  x = b.dropout("drop", b.flatten("flatten", x));
  x = b.relu("relu3", b.linear("fc1", x, 24));
  b.softmax("softmax", b.linear("fc2", x, 7));
  return std::move(b).build();
}

struct CpuStep {
  std::vector<Tensor> outputs, input_grads;
  double loss = 0;
};

CpuStep cpu_step(const Network& net, const Weights& w, const Tensor& x, const std::vector<int32_t>& labels,
                 Gradients& grads) {
  const auto count = static_cast<int64_t>(net.layers.size());
  std::vector<std::vector<LayerCache>> caches(static_cast<size_t>(count));
  CpuStep s;
  for (int64_t i = 0; i < count; ++i) {
    s.outputs.push_back(forward_range(net, w, i, i, i == 0 ? x : s.outputs.back(), caches[static_cast<size_t>(i)]));
  }
  Tensor dy;
  s.loss = softmax_cross_entropy(s.outputs.back(), labels, &dy);
  s.input_grads.resize(static_cast<size_t>(count));
  for (int64_t i = count - 1; i >= 0; --i) {
    dy = backward_range(net, w, i, i, dy, caches[static_cast<size_t>(i)], grads);
    s.input_grads[static_cast<size_t>(i)] = dy;
  }
  return s;
}

void expect_conformance(const Model& model, int64_t batch, CudaPrecision precision = CudaPrecision::exact) {
  const double tolerance = precision == CudaPrecision::exact ? kExactTolerance : kFastTolerance;
  const Network net = build_network(model);
  Weights cpu_weights = init_weights(net, 7);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  Tensor x(shape);
  for (float& v : x.data) v = value(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % static_cast<uint64_t>(net.classes));

  CudaNetwork gpu(model, cpu_weights, batch, 0, precision);
  gpu.set_batch(x, labels);
  size_t first_with_params = 0;
  while (cpu_weights[first_with_params].empty()) ++first_with_params;
  const SgdOptions options{0.05, 0.9, 1e-3};
  Sgd sgd(options);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Gradients grads = zero_gradients(net, cpu_weights);
    const CpuStep cpu = cpu_step(net, cpu_weights, x, labels, grads);
    EXPECT_NEAR(gpu.forward_and_loss(), cpu.loss, tolerance * std::abs(cpu.loss));
    gpu.backward();
    const Gradients gpu_grads = gpu.gradients();
    for (size_t i = 0; i < net.layers.size(); ++i) {
      SCOPED_TRACE(model.name + " layer " + net.layer_names[i]);
      EXPECT_LE(relative_error(gpu.output(static_cast<int64_t>(i)), cpu.outputs[i]), tolerance);
      // Computed after the first layer with parameters (before it nothing reads it).
      EXPECT_EQ(gpu.has_input_gradient(static_cast<int64_t>(i)), i > first_with_params);
      if (gpu.has_input_gradient(static_cast<int64_t>(i))) {
        EXPECT_LE(relative_error(gpu.input_gradient(static_cast<int64_t>(i)), cpu.input_grads[i]), tolerance);
      }
      ASSERT_EQ(gpu_grads[i].size(), grads[i].size());
      for (size_t p = 0; p < grads[i].size(); ++p) {
        EXPECT_LE(relative_error(gpu_grads[i][p].dense, grads[i][p].dense), tolerance) << "parameter " << p;
      }
    }
    gpu.update(options);
    sgd.step(cpu_weights, grads, 0, static_cast<int64_t>(net.layers.size()) - 1);
    const Weights gpu_weights = gpu.weights();
    for (size_t i = 0; i < net.layers.size(); ++i) {
      for (size_t p = 0; p < cpu_weights[i].size(); ++p) {
        EXPECT_LE(relative_error(gpu_weights[i][p], cpu_weights[i][p]), tolerance)
            << net.layer_names[i] << " parameter " << p;
      }
    }
    for (const LayerGrads& layer : gpu.gradients()) {
      for (const ParamGrad& g : layer) {
        for (const float v : g.dense.data) ASSERT_EQ(v, 0.0f) << "the update zeroes the gradients";
      }
    }
  }
}

TEST(CudaNetwork, MixedCnnConformsToTheCpuKernels) {
  SKIP_WITHOUT_GPU();
  expect_conformance(mixed_cnn(), 8);
}

TEST(CudaNetwork, ZooChainsConformToTheCpuKernels) {
  SKIP_WITHOUT_GPU();
  expect_conformance(build_zoo_model("fmnist-mlp"), 32);
  expect_conformance(build_zoo_model("fmnist-cnn"), 16);
}

TEST(CudaNetwork, FastConvolutionAlgorithmsStayNearTheCpuKernels) {
  SKIP_WITHOUT_GPU();
  expect_conformance(build_zoo_model("fmnist-cnn"), 64, CudaPrecision::fast);
}

TEST(CudaNetwork, ATimedPassTimesEveryLayer) {
  SKIP_WITHOUT_GPU();
  const Model model = mixed_cnn();
  const Network net = build_network(model);
  CudaNetwork gpu(model, init_weights(net, 3), 4, 0);
  Tensor x({4, 3, 13, 13}, 0.5f);
  gpu.set_batch(x, std::vector<int32_t>(4, 1));
  const GpuPassTimes t = gpu.timed_pass({0.01, 0.9, 0.0});
  ASSERT_EQ(t.forward_s.size(), model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    EXPECT_GE(t.forward_s[i], 0.0);
    EXPECT_LT(t.forward_s[i], 1.0);
    EXPECT_GE(t.backward_s[i], 0.0);
    const bool has_params = model.layers[i].param_count > 0;
    EXPECT_EQ(t.update_s[i] > 0.0, has_params) << model.layers[i].name;
  }
  EXPECT_GT(t.forward_s[0], 0.0) << "the first convolution takes time";
}

}  // namespace
}  // namespace trainsim
