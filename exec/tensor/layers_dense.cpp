// Dense CPU kernels: linear (Eigen GEMM), ReLU, and the layers that move no
// numbers (identity for dropout and softmax, reshape for flatten).
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

void check_grads(const LayerGrads& grads, const std::vector<std::vector<int64_t>>& shapes, const char* layer) {
  TRAINSIM_CHECK(grads.size() == shapes.size(), std::string(layer) + ": gradients not sized by zero_gradients");
  for (size_t i = 0; i < shapes.size(); ++i) {
    TRAINSIM_CHECK(!grads[i].sparse && grads[i].dense.shape == shapes[i],
                   std::string(layer) + ": gradient " + std::to_string(i) + " has the wrong shape");
  }
}

// Linear on the last dimension: every leading position is one row of a GEMM.
class Linear final : public KeepsInput {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias)
      : in_(in_features), out_(out_features), bias_(bias) {}

  std::vector<std::vector<int64_t>> param_shapes() const override {
    if (bias_) return {{out_, in_}, {out_}};
    return {{out_, in_}};
  }

  // y = x·Wᵀ + b, as torch.nn.Linear defines it.
  Tensor apply(const LayerParams& params, const Tensor& x) const override {
    TRAINSIM_CHECK(!x.shape.empty() && x.shape.back() == in_, "linear: input's last dimension is not " +
                                                                   std::to_string(in_));
    const int64_t positions = x.size() / in_;
    std::vector<int64_t> out_shape = x.shape;
    out_shape.back() = out_;
    Tensor y(out_shape);
    ConstMatrixView xm(x.data.data(), positions, in_);
    ConstMatrixView w(params[0].data.data(), out_, in_);
    MatrixView ym(y.data.data(), positions, out_);
    ym.noalias() = xm * w.transpose();
    if (bias_) ym.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(params[1].data.data(), out_);
    return y;
  }

  // dW += dyᵀ·x, db += Σ_rows dy, dx = dy·W.
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    check_grads(grads, param_shapes(), "linear");
    const Tensor& x = cache.saved.at(0);
    const int64_t positions = x.size() / in_;
    TRAINSIM_CHECK(dy.size() == positions * out_, "linear: dy does not match the forward's output");
    ConstMatrixView xm(x.data.data(), positions, in_);
    ConstMatrixView dym(dy.data.data(), positions, out_);
    ConstMatrixView w(params[0].data.data(), out_, in_);
    MatrixView dw(grads[0].dense.data.data(), out_, in_);
    dw.noalias() += dym.transpose() * xm;
    if (bias_) Eigen::Map<Eigen::RowVectorXf>(grads[1].dense.data.data(), out_) += dym.colwise().sum();
    Tensor dx(x.shape);
    MatrixView dxm(dx.data.data(), positions, in_);
    dxm.noalias() = dym * w;
    return dx;
  }

 private:
  int64_t in_, out_;
  bool bias_;
};

class Relu final : public ExecLayer {
 public:
  // y = max(x, 0), NaN kept (as PyTorch). The backward reads where y > 0,
  // which is where x > 0: it keeps y, or x when it is given x to keep.
  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    Tensor y = x;
    for (float& v : y.data) v = v < 0.0f ? 0.0f : v;
    cache.saved = {y};
    return y;
  }
  Tensor forward_consuming(const LayerParams&, Tensor&& x, LayerCache& cache) const override {
    Tensor y = x;
    for (float& v : y.data) v = v < 0.0f ? 0.0f : v;
    keep(cache, std::move(x));
    return y;
  }

  // dx = dy where the output (the input) is positive (the subgradient 0 at 0,
  // as PyTorch): a branch-free loop the compiler vectorizes (the signs are random).
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache& cache, LayerGrads&) const override {
    const Tensor& y = cache.saved.at(0);
    TRAINSIM_CHECK(dy.size() == y.size(), "relu: dy does not match the forward's output");
    Tensor dx = dy;
    dx.shape = y.shape;
    const float* out = y.data.data();
    float* grad = dx.data.data();
    for (int64_t i = 0; i < dx.size(); ++i) grad[i] = out[i] > 0.0f ? grad[i] : 0.0f;
    return dx;
  }
};

class Identity final : public ExecLayer {
 public:
  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return x;
  }
  Tensor forward_consuming(const LayerParams&, Tensor&& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return std::move(x);
  }
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override { return dy; }
};

class Reshape final : public ExecLayer {
 public:
  Reshape(std::vector<int64_t> in_shape, std::vector<int64_t> out_shape)
      : in_(std::move(in_shape)), out_(std::move(out_shape)) {
    TRAINSIM_CHECK(element_count(in_) == element_count(out_), "reshape: element counts differ");
  }

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return with_sample_shape(Tensor(x), out_);
  }
  Tensor forward_consuming(const LayerParams&, Tensor&& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return with_sample_shape(std::move(x), out_);
  }
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override {
    return with_sample_shape(Tensor(dy), in_);
  }

 private:
  static Tensor with_sample_shape(Tensor t, const std::vector<int64_t>& sample_shape) {
    TRAINSIM_CHECK(t.row_size() == element_count(sample_shape) || t.rows() == 0,
                   "reshape: input does not have the per-sample size the model declares");
    std::vector<int64_t> shape{t.rows()};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    t.shape = std::move(shape);
    return t;
  }

  std::vector<int64_t> in_, out_;
};

}  // namespace

std::unique_ptr<ExecLayer> make_linear(int64_t in_features, int64_t out_features, bool bias) {
  TRAINSIM_CHECK(in_features > 0 && out_features > 0, "linear: feature counts must be positive");
  return std::make_unique<Linear>(in_features, out_features, bias);
}

std::unique_ptr<ExecLayer> make_relu() { return std::make_unique<Relu>(); }

std::unique_ptr<ExecLayer> make_identity() { return std::make_unique<Identity>(); }

std::unique_ptr<ExecLayer> make_reshape(std::vector<int64_t> in_shape, std::vector<int64_t> out_shape) {
  return std::make_unique<Reshape>(std::move(in_shape), std::move(out_shape));
}

}  // namespace trainsim
