// Finite-difference checks of the CPU kernels. A layer's output y is reduced to
// the scalar f = Σ y·R with a fixed random R, so the analytic backward of R is
// ∇f; each gradient is compared along a random direction V with the central
// difference (f(θ + εV) - f(θ - εV)) / 2ε, robust in float32.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec/tensor/kernels_impl.hpp"

namespace trainsim::testing_fixtures {

// A tensor of `shape` holding `values` (row-major).
inline Tensor tensor_of(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(std::move(shape));
  t.data = std::move(values);
  return t;
}

// Every element of `t` within `tolerance` of `expected`.
inline void expect_values_near(const Tensor& t, const std::vector<float>& expected, double tolerance) {
  ASSERT_EQ(t.data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(t.data[i], expected[i], tolerance) << "element " << i;
}

// Values uniform in [low, high) from `rng`.
inline Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng, float low = -1.0f, float high = 1.0f) {
  Tensor t(std::move(shape));
  for (float& v : t.data) v = low + (high - low) * 0.5f * (1.0f + uniform_from_bits(rng, 1.0f));
  return t;
}

inline double dot(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0.0;
  for (int64_t i = 0; i < std::min(a.size(), b.size()); ++i) sum += static_cast<double>(a.data[i]) * b.data[i];
  return sum;
}

// ∇·V for a dense or sparse parameter gradient.
inline double grad_dot(const ParamGrad& grad, const Tensor& direction) {
  if (!grad.sparse) return dot(grad.dense, direction);
  const int64_t width = direction.row_size();
  double sum = 0.0;
  for (size_t i = 0; i < grad.rows.size(); ++i) {
    for (int64_t j = 0; j < width; ++j) {
      sum += static_cast<double>(grad.row_values.data[i * width + j]) * direction.data[grad.rows[i] * width + j];
    }
  }
  return sum;
}

// Central difference of `f` along `direction` applied to `values`.
inline double directional_difference(const std::function<double()>& f, Tensor& values, const Tensor& direction,
                                     double eps) {
  const Tensor saved = values;
  for (int64_t i = 0; i < values.size(); ++i) values.data[i] = saved.data[i] + static_cast<float>(eps) * direction.data[i];
  const double plus = f();
  for (int64_t i = 0; i < values.size(); ++i) values.data[i] = saved.data[i] - static_cast<float>(eps) * direction.data[i];
  const double minus = f();
  values = saved;
  return (plus - minus) / (2.0 * eps);
}

// |analytic - numeric| within a relative 1e-2 (plus a small absolute floor).
inline void expect_close(double analytic, double numeric, const std::string& what, double relative = 1e-2) {
  const double tolerance = relative * std::max(std::abs(analytic), std::abs(numeric)) + 1e-4;
  EXPECT_NEAR(analytic, numeric, tolerance) << what;
}

// Zeroed gradients for one layer's parameters.
inline LayerGrads zero_layer_grads(const ExecLayer& layer, const LayerParams& params) {
  LayerGrads grads;
  for (const Tensor& p : params) {
    ParamGrad g;
    g.sparse = layer.sparse();
    if (g.sparse) {
      g.row_values.shape = {0, p.row_size()};
    } else {
      g.dense = Tensor(p.shape);
    }
    grads.push_back(std::move(g));
  }
  return grads;
}

// Checks dL/dx (unless check_input is false) and every dL/dparam of `layer`.
inline void expect_layer_gradients(const ExecLayer& layer, LayerParams params, Tensor x, uint64_t seed,
                                   double eps = 1e-3, bool check_input = true) {
  std::mt19937_64 rng(seed);
  LayerCache cache;
  const Tensor y = layer.forward(params, x, cache);
  const Tensor r = random_tensor(y.shape, rng);
  LayerGrads grads = zero_layer_grads(layer, params);
  const Tensor dx = layer.backward(params, r, cache, grads);
  const auto f = [&] {
    LayerCache scratch;
    return dot(layer.forward(params, x, scratch), r);
  };
  if (check_input) {
    ASSERT_EQ(dx.shape, x.shape);
    const Tensor v = random_tensor(x.shape, rng);
    expect_close(dot(dx, v), directional_difference(f, x, v, eps), "input gradient");
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor v = random_tensor(params[k].shape, rng);
    expect_close(grad_dot(grads[k], v), directional_difference(f, params[k], v, eps),
                 "parameter " + std::to_string(k) + " gradient");
  }
}

}  // namespace trainsim::testing_fixtures
