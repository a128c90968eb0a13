// conv2d, max pooling and average pooling: hand-computed windows and
// finite-difference gradients through stride, padding, groups, overlap.
#include <gtest/gtest.h>

#include "exec/tensor/kernels_impl.hpp"
#include "tests/exec/tensor/gradient_check.hpp"

namespace trainsim {
namespace {

using testing_fixtures::expect_layer_gradients;
using testing_fixtures::random_tensor;
using testing_fixtures::zero_layer_grads;

// x = 1..9 as one 3x3 channel.
Tensor one_to_nine() {
  Tensor x({1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) x.data[i] = static_cast<float>(i + 1);
  return x;
}

LayerParams ones_kernel_2x2() { return {Tensor({1, 1, 2, 2}, 1.0f), Tensor({1}, 0.0f)}; }

TEST(Conv2d, SumsEachWindowForAnAllOnesKernel) {
  // 2x2 ones over [[1,2,3],[4,5,6],[7,8,9]], stride 1: windows sum to
  // 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24, 5+6+8+9 = 28.
  const auto conv = make_conv2d({1, 3, 3}, 1, WindowSpec{2, 2, 1, 1, 0, 0, 1, false}, true);
  LayerCache cache;
  const Tensor y = conv->forward(ones_kernel_2x2(), one_to_nine(), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(y.data, (std::vector<float>{12, 16, 24, 28}));
}

TEST(Conv2d, PadsWithZerosAndStrides) {
  // Padding 1, stride 2: out side (3 + 2 - 2)/2 + 1 = 2. Windows start at
  // rows/cols -1 and 1: [x00] = 1, [x01 + x02] = 5, [x10 + x20] = 11,
  // [x11 + x12 + x21 + x22] = 28. Bias 0.5 adds to each.
  const auto conv = make_conv2d({1, 3, 3}, 1, WindowSpec{2, 2, 2, 2, 1, 1, 1, false}, true);
  LayerParams params = ones_kernel_2x2();
  params[1].data[0] = 0.5f;
  LayerCache cache;
  const Tensor y = conv->forward(params, one_to_nine(), cache);
  EXPECT_EQ(y.data, (std::vector<float>{1.5f, 5.5f, 11.5f, 28.5f}));
}

TEST(Conv2d, BackwardOfOnesKernelCountsWindowsCoveringEachInput) {
  // With dy = 1 everywhere and a ones kernel (stride 1, 2x2 over 3x3), dx[i][j]
  // is the number of windows covering (i, j): corners 1, edges 2, centre 4;
  // dW[a][b] = Σ of the inputs the tap (a, b) sees: 12 + 16 + 24 + 28 shifted,
  // tap (0,0) sees x00,x01,x10,x11 = 1+2+4+5 = 12, tap (1,1) sees 5+6+8+9 = 28;
  // db = 4 outputs.
  const auto conv = make_conv2d({1, 3, 3}, 1, WindowSpec{2, 2, 1, 1, 0, 0, 1, false}, true);
  const LayerParams params = ones_kernel_2x2();
  LayerCache cache;
  conv->forward(params, one_to_nine(), cache);
  LayerGrads grads = zero_layer_grads(*conv, params);
  const Tensor dx = conv->backward(params, Tensor({1, 1, 2, 2}, 1.0f), cache, grads);
  EXPECT_EQ(dx.data, (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
  EXPECT_EQ(grads[0].dense.data, (std::vector<float>{12, 16, 24, 28}));
  EXPECT_EQ(grads[1].dense.data, (std::vector<float>{4}));
}

TEST(Conv2d, GroupsSeeOnlyTheirOwnChannels) {
  // 2 groups of 2 input channels: output channels 0-1 read inputs 0-1 only,
  // so changing input channel 3 leaves them unchanged and moves channels 2-3.
  std::mt19937_64 rng(8);
  const auto conv = make_conv2d({4, 4, 4}, 4, WindowSpec{3, 3, 1, 1, 1, 1, 2, false}, true);
  LayerParams params;
  conv->init_params(params, rng);
  Tensor x = random_tensor({1, 4, 4, 4}, rng);
  LayerCache cache;
  const Tensor before = conv->forward(params, x, cache);
  for (int i = 48; i < 64; ++i) x.data[i] += 1.0f;  // channel 3
  const Tensor after = conv->forward(params, x, cache);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(before.data[i], after.data[i]) << i;
  int changed = 0;
  for (int i = 32; i < 64; ++i) changed += before.data[i] != after.data[i];
  EXPECT_GT(changed, 0);
}

// Both kernels: oneDNN's where it is built in (im2col otherwise), and im2col.
constexpr Kernels kBothKernels[] = {Kernels::fastest, Kernels::reference};

TEST(Conv2d, GradientsMatchFiniteDifferencesWithStridePaddingGroups) {
  // 4 -> 6 channels, 2 groups, 3x3 kernel, stride 2, padding 1, 7x6 input.
  for (const Kernels kernels : kBothKernels) {
    SCOPED_TRACE(kernels == Kernels::reference ? "im2col" : "fastest");
    std::mt19937_64 rng(9);
    const auto conv = make_conv2d({4, 7, 6}, 6, WindowSpec{3, 3, 2, 2, 1, 1, 2, false}, true, kernels);
    LayerParams params;
    conv->init_params(params, rng);
    expect_layer_gradients(*conv, params, random_tensor({2, 4, 7, 6}, rng), 10);
  }
}

TEST(Conv2d, GradientsMatchFiniteDifferencesRectangularNoBias) {
  for (const Kernels kernels : kBothKernels) {
    SCOPED_TRACE(kernels == Kernels::reference ? "im2col" : "fastest");
    std::mt19937_64 rng(12);
    const auto conv = make_conv2d({3, 5, 6}, 2, WindowSpec{2, 3, 1, 2, 0, 1, 1, false}, false, kernels);
    LayerParams params;
    conv->init_params(params, rng);
    ASSERT_EQ(params.size(), 1u);
    expect_layer_gradients(*conv, params, random_tensor({3, 3, 5, 6}, rng), 13);
  }
}

// y[o][oh][ow] = b[o] + Σ_{c,i,j} W[o][c][i][j]·x[c][oh·sh − ph + i][ow·sw − pw + j]
// over the inside of the image, one group, evaluated term by term.
Tensor direct_conv(const Tensor& x, const LayerParams& p, const WindowSpec& w, int64_t out_h, int64_t out_w) {
  const int64_t channels = x.shape[1], height = x.shape[2], width = x.shape[3], out_c = p[0].shape[0];
  Tensor y({x.rows(), out_c, out_h, out_w});
  for (int64_t n = 0; n < x.rows(); ++n) {
    for (int64_t o = 0; o < out_c; ++o) {
      for (int64_t oh = 0; oh < out_h; ++oh) {
        for (int64_t ow = 0; ow < out_w; ++ow) {
          double sum = p[1].data[o];
          for (int64_t c = 0; c < channels; ++c) {
            for (int64_t i = 0; i < w.kernel_h; ++i) {
              for (int64_t j = 0; j < w.kernel_w; ++j) {
                const int64_t h = oh * w.stride_h - w.pad_h + i, v = ow * w.stride_w - w.pad_w + j;
                if (h < 0 || h >= height || v < 0 || v >= width) continue;
                sum += double{p[0].data[((o * channels + c) * w.kernel_h + i) * w.kernel_w + j]} *
                       x.data[((n * channels + c) * height + h) * width + v];
              }
            }
          }
          y.data[((n * out_c + o) * out_h + oh) * out_w + ow] = static_cast<float>(sum);
        }
      }
    }
  }
  return y;
}

TEST(Conv2d, MatchesTheDirectSumWhereWholeKernelColumnsReadOnlyPadding) {
  // A 3x2 image under a 3x5 kernel with padding 2 and 3 and column stride 3:
  // the kernel's first and last columns read only padding at some outputs,
  // and at stride 1 a padding wider than the kernel leaves whole output rows
  // and columns outside.
  std::mt19937_64 rng(21);
  for (const WindowSpec w : {WindowSpec{3, 5, 1, 3, 2, 3, 1, false}, WindowSpec{2, 2, 1, 1, 3, 3, 1, false},
                             WindowSpec{3, 3, 2, 2, 1, 1, 1, false}}) {
    for (const Kernels kernels : kBothKernels) {
      SCOPED_TRACE(kernels == Kernels::reference ? "im2col" : "fastest");
      const auto conv = make_conv2d({2, 3, 2}, 3, w, true, kernels);
      LayerParams params;
      conv->init_params(params, rng);
      for (float& b : params[1].data) b = 0.25f;
      const int64_t out_h = window_output_size(3, w.kernel_h, w.stride_h, w.pad_h, false);
      const int64_t out_w = window_output_size(2, w.kernel_w, w.stride_w, w.pad_w, false);
      const Tensor x = random_tensor({2, 2, 3, 2}, rng);
      LayerCache cache;
      const Tensor y = conv->forward(params, x, cache);
      const Tensor expected = direct_conv(x, params, w, out_h, out_w);
      ASSERT_EQ(y.shape, expected.shape);
      for (int64_t k = 0; k < y.size(); ++k) EXPECT_NEAR(y.data[k], expected.data[k], 1e-5f) << "element " << k;
      expect_layer_gradients(*conv, params, x, 17);
    }
  }
}

TEST(MaxPool, TakesWindowMaximaAndRoutesGradientToThem) {
  // 2x2 stride 2 over a 4x4 plane; maxima 6 (index 5), 8 (7), 14 (13), 16 (15)
  // of x = 1..16 row-major. dy = [1, 2, 3, 4] lands on those positions only.
  const auto pool = make_maxpool({1, 4, 4}, WindowSpec{2, 2, 2, 2, 0, 0, 1, false});
  Tensor x({1, 1, 4, 4});
  for (int i = 0; i < 16; ++i) x.data[i] = static_cast<float>(i + 1);
  LayerCache cache;
  const Tensor y = pool->forward({}, x, cache);
  EXPECT_EQ(y.data, (std::vector<float>{6, 8, 14, 16}));
  Tensor dy({1, 1, 2, 2});
  dy.data = {1, 2, 3, 4};
  LayerGrads none;
  const Tensor dx = pool->backward({}, dy, cache, none);
  std::vector<float> expected(16, 0.0f);
  expected[5] = 1, expected[7] = 2, expected[13] = 3, expected[15] = 4;
  EXPECT_EQ(dx.data, expected);
}

TEST(MaxPool, OverlappingWindowsAddTheirGradients) {
  // 3x3 stride 1 padding 1 over 1..9: 9 windows, one centred on each input.
  // The maximum 9 (index 8) lies in the 4 windows centred at (1,1), (1,2),
  // (2,1), (2,2) and wins each, so with dy = 1 it collects 4.
  const auto pool = make_maxpool({1, 3, 3}, WindowSpec{3, 3, 1, 1, 1, 1, 1, false});
  LayerCache cache;
  const Tensor y = pool->forward({}, one_to_nine(), cache);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{1, 1, 3, 3}));
  LayerGrads none;
  const Tensor dx = pool->backward({}, Tensor({1, 1, 3, 3}, 1.0f), cache, none);
  EXPECT_EQ(dx.data[8], 4.0f);
  float total = 0.0f;
  for (float v : dx.data) total += v;
  EXPECT_EQ(total, 9.0f);  // one unit of gradient per output
}

TEST(MaxPool, PaddingNeverWins) {
  // All inputs negative: a zero-padded window would return 0; ours returns the input maximum.
  const auto pool = make_maxpool({1, 2, 2}, WindowSpec{2, 2, 2, 2, 1, 1, 1, false});
  Tensor x({1, 1, 2, 2});
  x.data = {-4, -3, -2, -1};
  LayerCache cache;
  const Tensor y = pool->forward({}, x, cache);
  EXPECT_EQ(y.data, (std::vector<float>{-4, -3, -2, -1}));  // each window holds one input
}

TEST(MaxPool, GradientMatchesFiniteDifferencesWithOverlapAndCeilMode) {
  // 3x3 stride 2 ceil over 6x7: out ceil((6-3)/2)+1 = 3 by ceil((7-3)/2)+1 = 3.
  std::mt19937_64 rng(14);
  const auto pool = make_maxpool({2, 6, 7}, WindowSpec{3, 3, 2, 2, 0, 0, 1, true});
  LayerCache cache;
  const Tensor y = pool->forward({}, random_tensor({2, 2, 6, 7}, rng), cache);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2, 3, 3}));
  expect_layer_gradients(*pool, {}, random_tensor({2, 2, 6, 7}, rng), 15, 1e-4);
}

TEST(AvgPool, CeilModeDividesByTheCoveredInputs) {
  // 2x2 stride 2 ceil over 1..9 (3x3): out 2x2; windows (1+2+4+5)/4 = 3,
  // (3+6)/2 = 4.5, (7+8)/2 = 7.5, 9/1 = 9 (no padding: the divisor is clipped to the input).
  const auto pool = make_avgpool({1, 3, 3}, WindowSpec{2, 2, 2, 2, 0, 0, 1, true});
  LayerCache cache;
  const Tensor y = pool->forward({}, one_to_nine(), cache);
  EXPECT_EQ(y.data, (std::vector<float>{3, 4.5f, 7.5f, 9}));
}

TEST(AvgPool, GradientMatchesFiniteDifferencesWithPaddingAndOverlap) {
  std::mt19937_64 rng(16);
  const auto pool = make_avgpool({3, 5, 5}, WindowSpec{3, 3, 2, 2, 1, 1, 1, true});
  expect_layer_gradients(*pool, {}, random_tensor({2, 3, 5, 5}, rng), 17);
}

TEST(WindowOutputSize, FollowsFloorAndCeilRounding) {
  // (32 - 3)/2 + 1 = 15 floor; ceil: ceil(29/2) + 1 = 16 (last start 30 < 32, kept).
  EXPECT_EQ(window_output_size(32, 3, 2, 0, false), 15);
  EXPECT_EQ(window_output_size(32, 3, 2, 0, true), 16);
  // 5 with kernel 2 stride 2 pad 1 ceil: ceil(5/2) + 1 = 4, but the window at
  // 3·2 = 6 starts past in + pad = 6, so 3.
  EXPECT_EQ(window_output_size(5, 2, 2, 1, true), 3);
}

}  // namespace
}  // namespace trainsim
