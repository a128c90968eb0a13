// Convolution through oneDNN against the im2col reference: outputs, input
// gradients and parameter gradients over strides, paddings (negative right
// padding included), groups, rectangular kernels and biases; gradients
// added, not overwritten; one layer called from several threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "exec/tensor/conv_onednn.hpp"
#include "exec/tensor/kernels_impl.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

struct Case {
  std::vector<int64_t> in_shape;  // {C, H, W}
  int64_t out_channels;
  WindowSpec window;
  bool bias;
};

// 3x3 pad 1 (ResNet's), stride 2, 1x1 stride 2 whose last window stops short
// of the input (negative right padding), 5x5 pad 2 (fmnist-cnn's), groups,
// a rectangular kernel with uneven strides and no bias, one input channel.
const std::vector<Case> kCases = {
    {{16, 12, 12}, 16, WindowSpec{3, 3, 1, 1, 1, 1, 1, false}, false},
    {{8, 11, 9}, 12, WindowSpec{3, 3, 2, 2, 1, 1, 1, false}, true},
    {{8, 12, 12}, 16, WindowSpec{1, 1, 2, 2, 0, 0, 1, false}, false},
    {{1, 14, 14}, 8, WindowSpec{5, 5, 1, 1, 2, 2, 1, false}, true},
    {{8, 7, 7}, 8, WindowSpec{3, 3, 1, 1, 1, 1, 2, false}, true},
    {{3, 9, 10}, 5, WindowSpec{2, 3, 1, 2, 0, 1, 1, false}, false},
};

// Skips the test, saying why, where oneDNN is not built in or not loadable.
#define SKIP_WITHOUT_ONEDNN()                                                                            \
  do {                                                                                                   \
    std::string why;                                                                                     \
    if (OneDnnConv::make(make_geometry({1, 4, 4}, WindowSpec{3, 3, 1, 1, 1, 1, 1, false}, false), 1, false, \
                         &why) == nullptr) {                                                             \
      ASSERT_FALSE(why.empty());                                                                         \
      GTEST_SKIP() << why;                                                                               \
    }                                                                                                    \
  } while (false)

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  double scale = 0.0;
  for (float v : expected.data) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (int64_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual.data[i], expected.data[i], 1e-5 * std::max(scale, 1.0)) << what << " element " << i;
  }
}

TEST(OneDnnConv, AgreesWithIm2colOnOutputsAndGradients) {
  SKIP_WITHOUT_ONEDNN();
  std::mt19937_64 rng(31);
  for (const Case& c : kCases) {
    SCOPED_TRACE("input " + std::to_string(c.in_shape[0]) + "x" + std::to_string(c.in_shape[1]) + "x" +
                 std::to_string(c.in_shape[2]) + ", kernel " + std::to_string(c.window.kernel_h) + "x" +
                 std::to_string(c.window.kernel_w) + ", groups " + std::to_string(c.window.groups));
    const Geometry g = make_geometry(c.in_shape, c.window, false);
    const auto onednn = OneDnnConv::make(g, c.out_channels, c.bias);
    ASSERT_NE(onednn, nullptr);
    EXPECT_FALSE(onednn->implementation(3).empty());
    const auto reference = make_conv2d(c.in_shape, c.out_channels, c.window, c.bias, Kernels::reference);
    const auto fastest = make_conv2d(c.in_shape, c.out_channels, c.window, c.bias, Kernels::fastest);
    LayerParams params;
    reference->init_params(params, rng);
    for (const int64_t batch : {int64_t{1}, int64_t{3}}) {
      const Tensor x = random_tensor({batch, c.in_shape[0], c.in_shape[1], c.in_shape[2]}, rng);
      LayerCache cache_ref, cache_fast;
      const Tensor y_ref = reference->forward(params, x, cache_ref);
      const Tensor y_fast = fastest->forward(params, x, cache_fast);
      expect_close(y_fast, y_ref, "y");
      const Tensor dy = random_tensor(y_ref.shape, rng);
      LayerGrads grads_ref = zero_layer_grads(*reference, params);
      LayerGrads grads_fast = zero_layer_grads(*fastest, params);
      expect_close(fastest->backward(params, dy, cache_fast, grads_fast),
                   reference->backward(params, dy, cache_ref, grads_ref), "dx");
      for (size_t p = 0; p < params.size(); ++p) expect_close(grads_fast[p].dense, grads_ref[p].dense, "dparam");
    }
  }
}

TEST(OneDnnConv, AddsIntoTheGradientsItIsGiven) {
  SKIP_WITHOUT_ONEDNN();
  std::mt19937_64 rng(32);
  const Case& c = kCases[1];
  const auto conv = make_conv2d(c.in_shape, c.out_channels, c.window, c.bias, Kernels::fastest);
  LayerParams params;
  conv->init_params(params, rng);
  const Tensor x = random_tensor({2, c.in_shape[0], c.in_shape[1], c.in_shape[2]}, rng);
  LayerCache cache;
  const Tensor dy = random_tensor(conv->forward(params, x, cache).shape, rng);
  LayerGrads once = zero_layer_grads(*conv, params), twice = zero_layer_grads(*conv, params);
  conv->backward(params, dy, cache, once);
  conv->backward(params, dy, cache, twice);
  conv->backward(params, dy, cache, twice);
  for (size_t p = 0; p < params.size(); ++p) {
    Tensor doubled = once[p].dense;
    for (float& v : doubled.data) v *= 2.0f;
    expect_close(twice[p].dense, doubled, "gradient after two backwards");
  }
}

TEST(OneDnnConv, OneLayerServesSeveralThreadsAtOnce) {
  // Workers share the network's layers: each thread's passes through one
  // fresh layer, at its own batch size (so primitives are made while others
  // run), give what one thread alone gives.
  SKIP_WITHOUT_ONEDNN();
  std::mt19937_64 rng(33);
  const Case& c = kCases[0];
  const auto conv = make_conv2d(c.in_shape, c.out_channels, c.window, c.bias, Kernels::fastest);
  LayerParams params;
  conv->init_params(params, rng);
  constexpr int kThreads = 4;
  std::vector<Tensor> xs, alone(kThreads), together(kThreads);
  for (int t = 0; t < kThreads; ++t) xs.push_back(random_tensor({t + 1, c.in_shape[0], c.in_shape[1], c.in_shape[2]}, rng));
  auto pass = [&](const ExecLayer& layer, int t, Tensor& out) {
    LayerCache cache;
    const Tensor y = layer.forward(params, xs[static_cast<size_t>(t)], cache);
    LayerGrads grads = zero_layer_grads(layer, params);
    out = layer.backward(params, y, cache, grads);
    out.data.insert(out.data.end(), grads[0].dense.data.begin(), grads[0].dense.data.end());
  };
  for (int t = 0; t < kThreads; ++t) pass(*conv, t, alone[static_cast<size_t>(t)]);
  const auto shared = make_conv2d(c.in_shape, c.out_channels, c.window, c.bias, Kernels::fastest);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back(pass, std::cref(*shared), t, std::ref(together[static_cast<size_t>(t)]));
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(together[static_cast<size_t>(t)].data, alone[static_cast<size_t>(t)].data);
  }
}

}  // namespace
}  // namespace trainsim
