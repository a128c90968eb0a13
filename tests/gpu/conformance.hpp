// The GPU conformance tests' measures and drivers (tests/gpu/cuda_*_test.cpp):
// one layer alone, or a whole network, trained on the GPU device and on
// exec's CPU kernels from the same input, weights and labels, and compared.
// An embedding bag's sparse gradient is compared as the dense table it adds
// up to, which the GPU's whole pass keeps.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/tensor/layers.hpp"
#include "model/zoo/builder.hpp"

namespace trainsim {

constexpr double kExactTolerance = 1e-4;
constexpr double kFastTolerance = 1e-3;
constexpr double kTf32Tolerance = 1e-2;  // TF32 keeps 10 mantissa bits: each product's inputs within 2^-11
constexpr double kBf16Tolerance = 5e-2;  // bfloat16 keeps 7: within 2^-8, eight times TF32's rounding

// ‖a − b‖₂ / max(‖b‖₂, floor) (0 when both are zero).
inline double relative_error(const Tensor& a, const Tensor& b, double floor = 0) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += std::pow(double{a.data[i]} - b.data[i], 2);
    norm += std::pow(double{b.data[i]}, 2);
  }
  norm = std::max(norm, floor * floor);
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Each parameter's gradient is compared relative to at least a hundredth of
// the largest of its layer: attention's key bias has a gradient of zero in
// exact arithmetic (a shift of each row of scores leaves the softmax as it
// is), so both devices hold rounding there, and their ratio means nothing.
inline double gradient_floor(const LayerGrads& layer) {
  double largest = 0;
  for (const ParamGrad& g : layer) {
    double norm = 0;
    for (const float v : g.dense.data) norm += double{v} * v;
    largest = std::max(largest, std::sqrt(norm));
  }
  return 1e-2 * largest;
}

// The gradients with each sparse one (an embedding bag's rows) made the
// dense table it adds up to, as the GPU's whole pass keeps it.
inline Gradients densified(const Gradients& grads, const Weights& weights) {
  Gradients out = grads;
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t p = 0; p < out[i].size(); ++p) {
      if (!out[i][p].sparse) continue;
      ParamGrad dense;
      dense.dense = densify_gradient(grads[i][p], weights[i][p].shape);
      out[i][p] = std::move(dense);
    }
  }
  return out;
}

struct Case {
  Model model;
  int64_t batch = 0;
  Tensor x;
  std::vector<int32_t> labels;
};

inline Case make_case(Model model, int64_t batch) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  Case c{std::move(model), batch, Tensor(shape), {}};
  const Layer& first = c.model.layers.front();
  const bool ids = first.op == "embedding" || first.op == "embedding_bag";
  for (size_t i = 0; i < c.x.data.size(); ++i) {  // a bag's every fifth id padding
    c.x.data[i] = !ids ? value(rng)
                  : first.op == "embedding_bag" && i % 5 == 4
                      ? -1.0f
                      : static_cast<float>(rng() % static_cast<uint64_t>(first.sparse_rows));
  }
  const std::vector<int64_t>& out = c.model.layers.back().output_shape;
  const int64_t positions = batch * element_count(out) / out.back();
  for (int64_t i = 0; i < positions; ++i)
    c.labels.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(out.back())));
  return c;
}

constexpr SgdOptions kSgd{0.05, 0.9, 1e-3};
// A layer alone trains with a smaller step: a wide layer's head (fmnist-cnn's
// conv1 gives it 25,088 features) at 0.05 saturates the softmax in one step,
// and dL/dlogits then holds little but rounding.
constexpr SgdOptions kLayerSgd{1e-3, 0.9, 1e-3};

// Layer i of `model` alone on the model's input, then a flatten and a
// linear head of 10 classes: the loss over the layer's own last dimension
// would leave a convolution's bias gradient at zero (each row's softmax
// gradient sums to zero).
inline Model layer_alone(const Model& model, size_t i) {
  Layer layer = model.layers[i];
  const std::string& from = layer.inputs.front();
  const std::vector<int64_t>& in =
      from == kModelInput ? model.input_shape : model.layers[*find_layer(model, from)].output_shape;
  layer.inputs.assign(layer.inputs.size(), kModelInput);  // an add of the input to itself: dx = 2·dy
  ModelBuilder b(model.name + "." + layer.name, "test", in, 8);
  b.linear("test_head", b.flatten("test_flatten", b.custom(layer)), 10);
  return std::move(b).build();
}

// Two steps of the one-layer model `c` on both devices: layer 0's output
// and input gradient, then every gradient and weight.
inline void expect_layer_conforms(const Case& c) {
  SCOPED_TRACE(c.model.name);
  const Network net = build_network(c.model);
  const auto count = static_cast<int64_t>(net.layers.size());
  Weights cpu_weights = init_weights(net, 7);
  CudaNetwork gpu(c.model, cpu_weights, c.batch, 0, {CudaPrecision::exact, true});
  gpu.set_batch(c.x, c.labels);
  Sgd sgd(kLayerSgd);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Gradients grads = zero_gradients(net, cpu_weights);
    std::vector<std::vector<LayerCache>> caches(static_cast<size_t>(count));
    std::vector<Tensor> outputs;
    for (int64_t i = 0; i < count; ++i) {
      outputs.push_back(
          forward_range(net, cpu_weights, i, i, i == 0 ? c.x : outputs.back(), caches[static_cast<size_t>(i)]));
    }
    Tensor dy;
    const double loss = softmax_cross_entropy(outputs.back(), c.labels, &dy);
    for (int64_t i = count - 1; i >= 0; --i)
      dy = backward_range(net, cpu_weights, i, i, dy, caches[static_cast<size_t>(i)], grads);
    EXPECT_NEAR(gpu.forward_and_loss(), loss, kExactTolerance * std::abs(loss));
    EXPECT_LE(relative_error(gpu.output(0), packed_boundary(outputs.front())), kExactTolerance) << "output";
    gpu.backward();
    EXPECT_LE(relative_error(gpu.input_gradient(0), dy), kExactTolerance) << "input gradient";
    const Gradients gpu_grads = gpu.gradients();
    const Gradients cpu_grads = densified(grads, cpu_weights);
    for (size_t i = 0; i < grads.size(); ++i) {
      ASSERT_EQ(gpu_grads[i].size(), grads[i].size());
      for (size_t p = 0; p < grads[i].size(); ++p) {
        EXPECT_LE(relative_error(gpu_grads[i][p].dense, cpu_grads[i][p].dense, gradient_floor(cpu_grads[i])),
                  kExactTolerance)
            << net.layer_names[i] << " gradient " << p;
      }
    }
    gpu.update(kLayerSgd);
    sgd.step(cpu_weights, grads, 0, count - 1);
    const Weights gpu_weights = gpu.weights();
    for (size_t i = 0; i < cpu_weights.size(); ++i) {
      for (size_t p = 0; p < cpu_weights[i].size(); ++p) {
        EXPECT_LE(relative_error(gpu_weights[i][p], cpu_weights[i][p]), kExactTolerance)
            << net.layer_names[i] << " weights " << p;
      }
    }
    const Gradients cleared = gpu.gradients();
    for (const LayerGrads& layer : cleared) {
      for (const ParamGrad& g : layer) {
        for (const float v : g.dense.data) ASSERT_EQ(v, 0.0f) << "the update zeroes the gradients";
      }
    }
  }
}

// How closely a whole network on the GPU follows the CPU over five steps.
struct Closeness {
  double loss = 0;             // each step's loss, relative
  double weights = 0;          // every parameter after the five steps, relative; 0: not compared
  double first_gradients = 0;  // every parameter's gradient of the first step, relative; 0: not compared
};

// Five steps of a whole network on both devices: the first step's
// gradients, every step's loss, then the weights, each as `within` says.
inline void expect_network_trains_alike(const Case& c, CudaPrecision precision, const Closeness& within) {
  SCOPED_TRACE(c.model.name);
  const Network net = build_network(c.model);
  Weights cpu_weights = init_weights(net, 7);
  CudaNetwork gpu(c.model, cpu_weights, c.batch, 0, {precision, false});
  gpu.set_batch(c.x, c.labels);
  Sgd sgd(kSgd);
  const auto last = static_cast<int64_t>(net.layers.size()) - 1;
  for (int step = 0; step < 5; ++step) {
    Gradients grads = zero_gradients(net, cpu_weights);
    std::vector<LayerCache> caches;
    Tensor dy;
    const double loss = softmax_cross_entropy(forward_range(net, cpu_weights, 0, last, c.x, caches), c.labels, &dy);
    backward_range(net, cpu_weights, 0, last, dy, caches, grads);
    EXPECT_NEAR(gpu.forward_and_loss(), loss, within.loss * std::abs(loss)) << "step " << step;
    gpu.backward();
    if (step == 0 && within.first_gradients > 0) {
      const Gradients gpu_grads = gpu.gradients();
      const Gradients cpu_grads = densified(grads, cpu_weights);
      for (size_t i = 0; i < grads.size(); ++i) {
        for (size_t p = 0; p < grads[i].size(); ++p) {
          EXPECT_LE(relative_error(gpu_grads[i][p].dense, cpu_grads[i][p].dense, gradient_floor(cpu_grads[i])),
                    within.first_gradients)
              << net.layer_names[i] << " gradient " << p;
        }
      }
    }
    sgd.step(cpu_weights, grads, 0, last);
    gpu.update(kSgd);
  }
  if (within.weights == 0) return;
  const Weights gpu_weights = gpu.weights();
  for (size_t i = 0; i < net.layers.size(); ++i) {
    for (size_t p = 0; p < cpu_weights[i].size(); ++p) {
      EXPECT_LE(relative_error(gpu_weights[i][p], cpu_weights[i][p]), within.weights) << net.layer_names[i] << " " << p;
    }
  }
}

inline void expect_chain_trains_alike(const Case& c, CudaPrecision precision, double loss_tolerance) {
  expect_network_trains_alike(c, precision, {loss_tolerance, 1e-2, 0});
}

}  // namespace trainsim
