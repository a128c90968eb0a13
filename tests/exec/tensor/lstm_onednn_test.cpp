// The LSTM through oneDNN against exec's own (Eigen) recurrence: outputs,
// input gradients and parameter gradients over sizes (input narrower and
// wider than the hidden state, one sample and several), weights in ±1 that
// drive the gates into their curved ranges; one layer called from several
// threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "exec/tensor/kernels_impl.hpp"
#include "exec/tensor/lstm_onednn.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

#define SKIP_WITHOUT_ONEDNN()                                   \
  do {                                                          \
    std::string why;                                            \
    if (OneDnnLstm::make(2, 3, 4, &why) == nullptr) {           \
      ASSERT_FALSE(why.empty());                                \
      GTEST_SKIP() << why;                                      \
    }                                                           \
  } while (false)

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  double scale = 0.0;
  for (float v : expected.data) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (int64_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual.data[i], expected.data[i], 1e-5 * std::max(scale, 1.0)) << what << " element " << i;
  }
}

LayerParams params_in_unit_range(const ExecLayer& layer, std::mt19937_64& rng) {
  LayerParams params;
  for (const auto& shape : layer.param_shapes()) params.push_back(random_tensor(shape, rng));
  return params;
}

TEST(OneDnnLstm, AgreesWithTheEigenRecurrence) {
  SKIP_WITHOUT_ONEDNN();
  std::mt19937_64 rng(51);
  struct Size {
    int64_t tokens, in, hidden;
  };
  for (const Size size : {Size{5, 3, 8}, Size{7, 12, 4}, Size{16, 32, 32}}) {
    SCOPED_TRACE("T " + std::to_string(size.tokens) + ", in " + std::to_string(size.in) + ", hidden " +
                 std::to_string(size.hidden));
    const auto reference = make_lstm(size.tokens, size.in, size.hidden, Kernels::reference);
    const auto fastest = make_lstm(size.tokens, size.in, size.hidden, Kernels::fastest);
    for (const bool unit_range : {false, true}) {
      LayerParams params;
      if (unit_range) {
        params = params_in_unit_range(*reference, rng);
      } else {
        reference->init_params(params, rng);
      }
      for (const int64_t batch : {int64_t{1}, int64_t{4}}) {
        const Tensor x = random_tensor({batch, size.tokens, size.in}, rng);
        LayerCache cache_ref, cache_fast;
        const Tensor y_ref = reference->forward(params, x, cache_ref);
        expect_close(fastest->forward(params, x, cache_fast), y_ref, "y");
        const Tensor dy = random_tensor(y_ref.shape, rng);
        LayerGrads grads_ref = zero_layer_grads(*reference, params);
        LayerGrads grads_fast = zero_layer_grads(*fastest, params);
        expect_close(fastest->backward(params, dy, cache_fast, grads_fast),
                     reference->backward(params, dy, cache_ref, grads_ref), "dx");
        expect_close(grads_fast[0].dense, grads_ref[0].dense, "dW");
        expect_close(grads_fast[1].dense, grads_ref[1].dense, "db");
      }
    }
  }
}

TEST(OneDnnLstm, OneLayerServesSeveralThreadsAtOnce) {
  SKIP_WITHOUT_ONEDNN();
  std::mt19937_64 rng(52);
  const auto lstm = make_lstm(6, 5, 7, Kernels::fastest);
  const LayerParams params = params_in_unit_range(*lstm, rng);
  constexpr int kThreads = 4;
  std::vector<Tensor> xs, alone(kThreads), together(kThreads);
  for (int t = 0; t < kThreads; ++t) xs.push_back(random_tensor({t + 1, 6, 5}, rng));
  auto pass = [&](const ExecLayer& layer, int t, Tensor& out) {
    LayerCache cache;
    const Tensor y = layer.forward(params, xs[static_cast<size_t>(t)], cache);
    LayerGrads grads = zero_layer_grads(layer, params);
    out = layer.backward(params, y, cache, grads);
    out.data.insert(out.data.end(), grads[0].dense.data.begin(), grads[0].dense.data.end());
  };
  for (int t = 0; t < kThreads; ++t) pass(*lstm, t, alone[static_cast<size_t>(t)]);
  const auto shared = make_lstm(6, 5, 7, Kernels::fastest);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back(pass, std::cref(*shared), t, std::ref(together[static_cast<size_t>(t)]));
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(together[static_cast<size_t>(t)].data, alone[static_cast<size_t>(t)].data);
    }
  }
}

}  // namespace
}  // namespace trainsim
