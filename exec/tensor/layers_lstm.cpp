// The LSTM kernel: a unidirectional recurrence over {T, in} per sample, the
// input's products for the whole sequence at once and one recurrent product
// per time step for the whole batch, and backpropagation through time.
#include <cmath>
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "exec/tensor/small_product.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

using RowVectorView = Eigen::Map<Eigen::RowVectorXf>;
using ConstRowVectorView = Eigen::Map<const Eigen::RowVectorXf>;
// Step t of a {B, T, w} tensor: B rows of w values, T·w apart.
using StepView = Eigen::Map<RowMajorMatrix, 0, Eigen::OuterStride<>>;
using ConstStepView = Eigen::Map<const RowMajorMatrix, 0, Eigen::OuterStride<>>;

// σ(v) in place, on an Eigen array expression: Eigen's logistic (a rational
// approximation, exp only below -9), not 1 / (1 + exp(-v)).
template <typename Block>
void sigmoid_in_place(Block&& v) {
  v = v.logistic();
}

// Hochreiter & Schmidhuber 1997 with the forget gate of Gers et al. 2000, as
// torch.nn.LSTM (gate order i, f, g, o; one bias vector).
class Lstm final : public ExecLayer {
 public:
  Lstm(int64_t tokens, int64_t in_features, int64_t hidden)
      : tokens_(tokens), in_(in_features), hidden_(hidden), width_(in_features + hidden) {}

  std::vector<std::vector<int64_t>> param_shapes() const override { return {{4 * hidden_, width_}, {4 * hidden_}}; }

  // torch.nn.LSTM: W then b, uniform in ±1/sqrt(hidden) (not the default fan_in in + hidden).
  void init_params(LayerParams& params, std::mt19937_64& rng) const override {
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden_)));
    params.clear();
    for (const auto& shape : param_shapes()) {
      Tensor tensor(shape);
      for (float& value : tensor.data) value = uniform_from_bits(rng, bound);
      params.push_back(std::move(tensor));
    }
  }

  // Per step t: gates = x_t·W_xᵀ + h_{t-1}·W_hᵀ + b (W = [W_x, W_h]), then
  // i, f, o = σ(·), g = tanh(·); c_t = f⊙c_{t-1} + i⊙g, h_t = o⊙tanh(c_t).
  // The input's part of every step is one product over the whole sequence
  // (as cuDNN and PyTorch do); only h_{t-1}·W_hᵀ waits for the step before.
  // Keeps x, the output (every h_t), and step-major ({T, B, ·}) the
  // activated gates, c_t and tanh(c_t).
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    Tensor y = run(params, x, cache);
    cache.saved[0] = x;
    return y;
  }
  Tensor forward_consuming(const LayerParams& params, Tensor&& x, LayerCache& cache) const override {
    Tensor y = run(params, x, cache);
    cache.saved[0] = std::move(x);
    return y;
  }

  // Backpropagation through time, t = T-1..0, from dh_next = dc_next = 0:
  // dh = dY_t + dh_next, dc = dh⊙o⊙(1 - tanh²c_t) + dc_next; d gates (before
  // their nonlinearities) di = dc⊙g⊙i(1 - i), df = dc⊙c_{t-1}⊙f(1 - f),
  // dg = dc⊙i⊙(1 - g²), do = dh⊙tanh(c_t)⊙o(1 - o); dh_next = d gates·W_h,
  // dc_next = dc⊙f. Then over the whole sequence at once: dW_x += d gatesᵀ·x,
  // dW_h += d gatesᵀ·h_{t-1}, db += Σ d gates, dx = d gates·W_x.
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    check_params(params);
    check_grads(grads);
    TRAINSIM_CHECK(cache.saved.size() == 5, "lstm: the cache is not from this layer's forward");
    const Tensor &x = cache.saved[0], &y = cache.saved[1], &gates = cache.saved[2], &c = cache.saved[3],
                 &tanh_c = cache.saved[4];
    TRAINSIM_CHECK(gates.shape.size() == 3 && gates.shape[0] == tokens_ && gates.shape[2] == 4 * hidden_,
                   "lstm: the cache is not from this layer's forward");
    const int64_t batch = gates.shape[1], h = hidden_;
    TRAINSIM_CHECK(dy.shape == (std::vector<int64_t>{batch, tokens_, h}),
                   "lstm: dy does not match the forward's output " + sequence_shape(h));
    ConstMatrixView w(params[0].data.data(), 4 * h, width_);
    MatrixView dw(grads[0].dense.data.data(), 4 * h, width_);
    Tensor dgates_all({batch, tokens_, 4 * h});  // d gates of every step, {B, T, 4h} as x
    RowMajorMatrix dh_next = RowMajorMatrix::Zero(batch, h), dc_next = RowMajorMatrix::Zero(batch, h);
    RowMajorMatrix dh(batch, h), dc(batch, h);
    // dh_next = d gates·W_h: W_h (4h×h) read in place, rows width_ apart.
    const SmallProduct through_w_h(batch, h, 4 * h, tokens_ * 4 * h, width_, h, false);
    for (int64_t t = tokens_ - 1; t >= 0 && batch > 0; --t) {
      ConstMatrixView act(gates.data.data() + t * batch * 4 * h, batch, 4 * h);
      ConstMatrixView tct(tanh_c.data.data() + t * batch * h, batch, h);
      const auto i = act.leftCols(h).array(), f = act.middleCols(h, h).array();
      const auto g = act.middleCols(2 * h, h).array(), o = act.rightCols(h).array();
      StepView dgates = step(dgates_all, t, 4 * h);
      dh = step(dy, t, h) + dh_next;
      dc.array() = dh.array() * o * (1.0f - tct.array().square()) + dc_next.array();
      dgates.leftCols(h).array() = dc.array() * g * i * (1.0f - i);
      if (t > 0) {
        ConstMatrixView c_prev(c.data.data() + (t - 1) * batch * h, batch, h);
        dgates.middleCols(h, h).array() = dc.array() * c_prev.array() * f * (1.0f - f);
      } else {
        dgates.middleCols(h, h).setZero();
      }
      dgates.middleCols(2 * h, h).array() = dc.array() * i * (1.0f - g.square());
      dgates.rightCols(h).array() = dh.array() * tct.array() * o * (1.0f - o);
      through_w_h(dgates.data(), w.data() + in_, dh_next.data());
      dc_next.array() = dc.array() * f;
    }
    Tensor dx({batch, tokens_, in_});
    if (batch == 0) return dx;
    const int64_t positions = batch * tokens_;
    ConstMatrixView dg(dgates_all.data.data(), positions, 4 * h);
    dw.leftCols(in_).noalias() += dg.transpose() * ConstMatrixView(x.data.data(), positions, in_);
    // h_{t-1} of every position: the output one step back, 0 at t = 0.
    Tensor h_prev({batch, tokens_, h});
    for (int64_t t = 1; t < tokens_; ++t) step(h_prev, t, h) = step(y, t - 1, h);
    dw.rightCols(h).noalias() += dg.transpose() * ConstMatrixView(h_prev.data.data(), positions, h);
    RowVectorView(grads[1].dense.data.data(), 4 * h) += dg.colwise().sum();
    // dx = d gates·W_x: W_x (4h×in) read in place, rows width_ apart.
    SmallProduct(positions, in_, 4 * h, 4 * h, width_, in_, false)(dg.data(), w.data(), dx.data.data());
    return dx;
  }

 private:
  // The forward; cache.saved = {(x, set by the caller), y, gates, c, tanh(c)}.
  Tensor run(const LayerParams& params, const Tensor& x, LayerCache& cache) const {
    check_params(params);
    TRAINSIM_CHECK(is_sequence(x, in_), "lstm: input is not " + sequence_shape(in_));
    const int64_t batch = x.rows(), h = hidden_, positions = batch * tokens_;
    Tensor y({batch, tokens_, h});
    Tensor gates({tokens_, batch, 4 * h}), c({tokens_, batch, h}), tanh_c({tokens_, batch, h});
    ConstMatrixView w(params[0].data.data(), 4 * h, width_);
    // Wᵀ ({in + h}×4h) made once: x·W_xᵀ over the sequence and h_{t-1}·W_hᵀ
    // at every step read its rows.
    const RowMajorMatrix w_t = w.transpose();
    const float* w_h_t = w_t.data() + in_ * 4 * h;
    const SmallProduct times_w_h_t(batch, 4 * h, h, tokens_ * h, 4 * h, 4 * h, true);
    // Every step's x_t·W_xᵀ + b, {B, T, 4h} as x.
    Tensor x_part({batch, tokens_, 4 * h});
    if (batch > 0) {  // no sample (build_network infers shapes so): no views into empty storage
      MatrixView xw(x_part.data.data(), positions, 4 * h);
      SmallProduct(positions, 4 * h, in_, in_, 4 * h, 4 * h, false)(x.data.data(), w_t.data(), xw.data());
      xw.rowwise() += ConstRowVectorView(params[1].data.data(), 4 * h);
    }
    for (int64_t t = 0; batch > 0 && t < tokens_; ++t) {
      MatrixView act(gates.data.data() + t * batch * 4 * h, batch, 4 * h);
      act = step(std::as_const(x_part), t, 4 * h);
      if (t > 0) times_w_h_t(step(std::as_const(y), t - 1, h).data(), w_h_t, act.data());
      sigmoid_in_place(act.leftCols(2 * h).array());
      act.middleCols(2 * h, h).array() = act.middleCols(2 * h, h).array().tanh();
      sigmoid_in_place(act.rightCols(h).array());
      MatrixView ct(c.data.data() + t * batch * h, batch, h);
      ct.array() = act.leftCols(h).array() * act.middleCols(2 * h, h).array();
      if (t > 0) {
        ct.array() += act.middleCols(h, h).array() * ConstMatrixView(c.data.data() + (t - 1) * batch * h, batch, h).array();
      }
      MatrixView tct(tanh_c.data.data() + t * batch * h, batch, h);
      tct.array() = ct.array().tanh();
      step(y, t, h).array() = act.rightCols(h).array() * tct.array();
    }
    cache = LayerCache{};
    keep(cache, Tensor{}, y, std::move(gates), std::move(c), std::move(tanh_c));
    return y;
  }

  std::string sequence_shape(int64_t width) const {
    return "{B, " + std::to_string(tokens_) + ", " + std::to_string(width) + "}";
  }

  bool is_sequence(const Tensor& t, int64_t width) const {
    return t.shape.size() == 3 && t.shape[1] == tokens_ && t.shape[2] == width;
  }

  StepView step(Tensor& t, int64_t s, int64_t width) const {
    return StepView(t.data.data() + s * width, t.rows(), width, Eigen::OuterStride<>(tokens_ * width));
  }

  ConstStepView step(const Tensor& t, int64_t s, int64_t width) const {
    return ConstStepView(t.data.data() + s * width, t.rows(), width, Eigen::OuterStride<>(tokens_ * width));
  }

  void check_params(const LayerParams& params) const {
    const auto shapes = param_shapes();
    TRAINSIM_CHECK(params.size() == 2 && params[0].shape == shapes[0] && params[1].shape == shapes[1],
                   "lstm: needs W {" + std::to_string(4 * hidden_) + ", " + std::to_string(width_) + "} and b {" +
                       std::to_string(4 * hidden_) + "}");
  }

  void check_grads(const LayerGrads& grads) const {
    const auto shapes = param_shapes();
    TRAINSIM_CHECK(grads.size() == shapes.size(), "lstm: gradients not sized by zero_gradients");
    for (size_t k = 0; k < shapes.size(); ++k) {
      TRAINSIM_CHECK(!grads[k].sparse && grads[k].dense.shape == shapes[k],
                     "lstm: gradient " + std::to_string(k) + " has the wrong shape");
    }
  }

  int64_t tokens_, in_, hidden_, width_;  // width_ = in + hidden, the columns of W
};

}  // namespace

std::unique_ptr<ExecLayer> make_lstm(int64_t tokens, int64_t in_features, int64_t hidden) {
  TRAINSIM_CHECK(tokens > 0 && in_features > 0 && hidden > 0, "lstm: tokens, input and hidden sizes must be positive");
  return std::make_unique<Lstm>(tokens, in_features, hidden);
}

}  // namespace trainsim
