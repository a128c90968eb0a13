// Normalization and the kernels that come with it in ResNets and Transformers:
// batch norm (training and evaluation), layer norm, exact GELU (in float),
// global average pooling.
// Values are stored as float; sums over a plane or a row are taken in float
// packets, and accumulate over planes in double.
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include <unsupported/Eigen/SpecialFunctions>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr double kNormEps = 1e-5;

void check_norm_grads(const LayerGrads& grads, int64_t width, const char* layer) {
  TRAINSIM_CHECK(grads.size() == 2, std::string(layer) + ": gradients not sized by zero_gradients");
  for (const ParamGrad& g : grads) {
    TRAINSIM_CHECK(!g.sparse && g.dense.shape == std::vector<int64_t>{width},
                   std::string(layer) + ": a gradient has the wrong shape");
  }
}

void check_norm_params(const LayerParams& params, int64_t width, const char* layer) {
  TRAINSIM_CHECK(params.size() == 2 && params[0].shape == std::vector<int64_t>{width} &&
                     params[1].shape == std::vector<int64_t>{width},
                 std::string(layer) + ": scale and shift must be {" + std::to_string(width) + "}");
}

// Scale, shift and the init 1 and 0 both normalizations share.
class AffineNorm : public ExecLayer {
 public:
  explicit AffineNorm(int64_t width) : width_(width) {}

  std::vector<std::vector<int64_t>> param_shapes() const override { return {{width_}, {width_}}; }

  void init_params(LayerParams& params, std::mt19937_64&) const override {
    params = {Tensor({width_}, 1.0f), Tensor({width_}, 0.0f)};
  }

 protected:
  int64_t width_;
};

// Ioffe & Szegedy 2015, Algorithm 1 (training mode) and §3.1 (inference with
// population statistics), per channel over batch and positions. The running
// mean and variance follow PyTorch: momentum 0.1, the variance unbiased.
class BatchNorm final : public AffineNorm {
 public:
  explicit BatchNorm(const std::vector<int64_t>& in_shape)
      : AffineNorm(checked(in_shape).front()), plane_(in_shape.size() == 3 ? in_shape[1] * in_shape[2] : 1) {}

  // Running mean 0 and variance 1, as PyTorch starts them.
  LayerParams init_statistics() const override { return {Tensor({width_}, 0.0f), Tensor({width_}, 1.0f)}; }

  // running_mean += m·(μ_c - running_mean); running_var += m·(σ²_c·N/(N-1) - running_var).
  void update_statistics(LayerParams& statistics, const LayerCache& cache) const override {
    check_statistics(statistics);
    const Tensor& mean = cache.saved.at(2);
    const Tensor& variance = cache.saved.at(3);
    const double count = static_cast<double>(cache.saved.at(0).rows() * plane_);
    const double unbiased = count > 1 ? count / (count - 1) : 1.0;
    for (int64_t c = 0; c < width_; ++c) {
      float& running_mean = statistics[0].data[c];
      float& running_var = statistics[1].data[c];
      running_mean += kBatchNormMomentum * (mean.data[c] - running_mean);
      running_var += kBatchNormMomentum * (static_cast<float>(variance.data[c] * unbiased) - running_var);
    }
  }

  // y = scale_c·(x - running_mean_c) / sqrt(running_var_c + eps) + shift_c: each sample on its own.
  Tensor forward_eval(const LayerParams& params, const LayerParams& statistics,
                      std::span<const Tensor* const> xs) const override {
    check_norm_params(params, width_, "batchnorm");
    check_statistics(statistics);
    TRAINSIM_CHECK(xs.size() == 1, "batchnorm reads one tensor");
    const Tensor& x = *xs[0];
    TRAINSIM_CHECK(x.row_size() == width_ * plane_ || x.rows() == 0, "batchnorm: input size mismatch");
    Tensor y(x.shape);
    for (int64_t c = 0; c < width_; ++c) {
      const double inv = 1.0 / std::sqrt(static_cast<double>(statistics[1].data[c]) + kNormEps);
      const auto scale = static_cast<float>(params[0].data[c] * inv);
      const auto shift = static_cast<float>(params[1].data[c] - statistics[0].data[c] * params[0].data[c] * inv);
      for (int64_t b = 0; b < x.rows(); ++b) plane(y, b, c) = plane(x, b, c) * scale + shift;
    }
    return y;
  }

  // x̂ = (x - μ_c) / sqrt(σ²_c + eps), y = scale_c·x̂ + shift_c; keeps x̂,
  // 1/sqrt(σ²_c + eps) and the batch's μ_c and σ²_c (for the running statistics).
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    check_norm_params(params, width_, "batchnorm");
    TRAINSIM_CHECK(x.row_size() == width_ * plane_ || x.rows() == 0, "batchnorm: input size mismatch");
    const int64_t batch = x.rows();
    const double count = static_cast<double>(batch * plane_);
    Tensor x_hat(x.shape), inv_std({width_}), means({width_}), variances({width_});
    Tensor y(x.shape);
    for (int64_t c = 0; c < width_ && batch > 0; ++c) {
      double sum = 0.0;
      for (int64_t b = 0; b < batch; ++b) sum += plane(x, b, c).sum();
      const auto mean = static_cast<float>(sum / count);
      double squares = 0.0;
      for (int64_t b = 0; b < batch; ++b) squares += (plane(x, b, c) - mean).square().sum();
      const double inv = 1.0 / std::sqrt(squares / count + kNormEps);
      inv_std.data[c] = static_cast<float>(inv);
      means.data[c] = mean;
      variances.data[c] = static_cast<float>(squares / count);
      const float scale = params[0].data[c], shift = params[1].data[c];
      for (int64_t b = 0; b < batch; ++b) {
        plane(x_hat, b, c) = (plane(x, b, c) - mean) * inv_std.data[c];
        plane(y, b, c) = plane(x_hat, b, c) * scale + shift;
      }
    }
    keep(cache, std::move(x_hat), std::move(inv_std), std::move(means), std::move(variances));
    return y;
  }

  // With g = dy·scale and N values per channel:
  // dx = inv_std / N · (N·g - Σg - x̂·Σ(g·x̂)), dscale += Σ dy·x̂, dshift += Σ dy.
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    check_norm_params(params, width_, "batchnorm");
    check_norm_grads(grads, width_, "batchnorm");
    const Tensor& x_hat = cache.saved.at(0);
    const Tensor& inv_std = cache.saved.at(1);
    TRAINSIM_CHECK(dy.size() == x_hat.size(), "batchnorm: dy does not match the forward's output");
    const int64_t batch = x_hat.rows();
    const double count = static_cast<double>(batch * plane_);
    Tensor dx(x_hat.shape);
    for (int64_t c = 0; c < width_ && batch > 0; ++c) {
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        sum_dy += plane(dy, b, c).sum();
        sum_dy_xhat += (plane(dy, b, c) * plane(x_hat, b, c)).sum();
      }
      grads[0].dense.data[c] += static_cast<float>(sum_dy_xhat);
      grads[1].dense.data[c] += static_cast<float>(sum_dy);
      const double factor = params[0].data[c] * static_cast<double>(inv_std.data[c]) / count;
      const auto per_dy = static_cast<float>(factor * count), offset = static_cast<float>(factor * sum_dy),
                 per_xhat = static_cast<float>(factor * sum_dy_xhat);
      for (int64_t b = 0; b < batch; ++b) {
        plane(dx, b, c) = plane(dy, b, c) * per_dy - offset - plane(x_hat, b, c) * per_xhat;
      }
    }
    return dx;
  }

 private:
  void check_statistics(const LayerParams& statistics) const {
    TRAINSIM_CHECK(statistics.size() == 2 && statistics[0].shape == std::vector<int64_t>{width_} &&
                       statistics[1].shape == std::vector<int64_t>{width_},
                   "batchnorm: running mean and variance must be {" + std::to_string(width_) + "}");
  }

  // The values of channel c of sample b: a plane of H·W (or one) floats,
  // whose sums Eigen takes in packets (accumulated over planes in double).
  Eigen::Map<const Eigen::ArrayXf> plane(const Tensor& t, int64_t b, int64_t c) const {
    return Eigen::Map<const Eigen::ArrayXf>(t.data.data() + (b * width_ + c) * plane_, plane_);
  }
  Eigen::Map<Eigen::ArrayXf> plane(Tensor& t, int64_t b, int64_t c) const {
    return Eigen::Map<Eigen::ArrayXf>(t.data.data() + (b * width_ + c) * plane_, plane_);
  }

  static const std::vector<int64_t>& checked(const std::vector<int64_t>& in_shape) {
    TRAINSIM_CHECK(in_shape.size() == 1 || in_shape.size() == 3, "batchnorm: input is not {C} or {C, H, W}");
    for (int64_t dim : in_shape) TRAINSIM_CHECK(dim > 0, "batchnorm: dimensions must be positive");
    return in_shape;
  }

  int64_t plane_;  // H·W, or 1 for {C}
};

// Ba, Kiros & Hinton 2016, over the last dimension, as torch.nn.LayerNorm.
class LayerNorm final : public AffineNorm {
 public:
  explicit LayerNorm(int64_t features) : AffineNorm(features) {}

  // Per row of the last dimension: x̂ = (x - μ) / sqrt(σ² + eps), y = scale·x̂ + shift.
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    check_norm_params(params, width_, "layernorm");
    TRAINSIM_CHECK(!x.shape.empty() && x.shape.back() == width_,
                   "layernorm: input's last dimension is not " + std::to_string(width_));
    const int64_t rows = x.size() / width_;
    const auto d = static_cast<float>(width_);
    Tensor x_hat(x.shape), inv_std({rows}), y(x.shape);
    for (int64_t r = 0; r < rows; ++r) {
      const auto xr = row(x, r);
      const float mean = xr.sum() / d;
      const float variance = (xr - mean).square().sum() / d;
      inv_std.data[r] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance) + kNormEps));
      row(x_hat, r) = (xr - mean) * inv_std.data[r];
      row(y, r) = row(x_hat, r) * row(params[0], 0) + row(params[1], 0);
    }
    keep(cache, std::move(x_hat), std::move(inv_std));
    return y;
  }

  // With g = dy·scale per row of d values: dx = inv_std / d · (d·g - Σg - x̂·Σ(g·x̂));
  // dscale += Σ_rows dy·x̂, dshift += Σ_rows dy.
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    check_norm_params(params, width_, "layernorm");
    check_norm_grads(grads, width_, "layernorm");
    const Tensor& x_hat = cache.saved.at(0);
    const Tensor& inv_std = cache.saved.at(1);
    TRAINSIM_CHECK(dy.size() == x_hat.size(), "layernorm: dy does not match the forward's output");
    const int64_t rows = inv_std.size();
    const auto d = static_cast<float>(width_);
    Tensor dx(x_hat.shape);
    Eigen::ArrayXf g(width_);
    for (int64_t r = 0; r < rows; ++r) {
      const auto dyr = row(dy, r), xr = row(x_hat, r);
      row(grads[0].dense, 0) += dyr * xr;
      row(grads[1].dense, 0) += dyr;
      g = dyr * row(params[0], 0);
      const float sum_g = g.sum(), sum_g_xhat = (g * xr).sum();
      row(dx, r) = (inv_std.data[r] / d) * (d * g - sum_g - xr * sum_g_xhat);
    }
    return dx;
  }

 private:
  // Row r of the last dimension, as a packet-wise array.
  Eigen::Map<const Eigen::ArrayXf> row(const Tensor& t, int64_t r) const {
    return Eigen::Map<const Eigen::ArrayXf>(t.data.data() + r * width_, width_);
  }
  Eigen::Map<Eigen::ArrayXf> row(Tensor& t, int64_t r) const {
    return Eigen::Map<Eigen::ArrayXf>(t.data.data() + r * width_, width_);
  }
};

Eigen::Map<const Eigen::ArrayXf> values(const Tensor& t) {
  return Eigen::Map<const Eigen::ArrayXf>(t.data.data(), t.size());
}

// Φ(v) = (1 + erf(v/√2))/2, elementwise.
template <typename Values>
auto normal_cdf(const Values& v) {
  constexpr auto kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
  return 0.5f * (1.0f + (v * kInvSqrt2).erf());
}

// Hendrycks & Gimpel 2016, the exact form y = x·Φ(x) = 0.5·x·(1 + erf(x/√2)).
class Gelu final : public KeepsInput {
 public:
  // y = x·Φ(x), Φ(x) = (1 + erf(x/√2))/2, in float over whole packets
  // (Eigen's rational erf, within a few ulp; as PyTorch's exact GELU on CPU).
  Tensor apply(const LayerParams&, const Tensor& x) const override {
    Tensor y(x.shape);
    const auto v = values(x);
    Eigen::Map<Eigen::ArrayXf>(y.data.data(), x.size()) = v * normal_cdf(v);
    return y;
  }

  // dx = dy·(Φ(x) + x·φ(x)), φ(x) = exp(−x²/2)/√(2π).
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache& cache, LayerGrads&) const override {
    const Tensor& x = cache.saved.at(0);
    TRAINSIM_CHECK(dy.size() == x.size(), "gelu: dy does not match the forward's output");
    Tensor dx(x.shape);
    const auto v = values(x);
    constexpr auto kInvSqrt2Pi = static_cast<float>(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
    Eigen::Map<Eigen::ArrayXf>(dx.data.data(), x.size()) =
        values(dy) * (normal_cdf(v) + v * (-0.5f * v.square()).exp() * kInvSqrt2Pi);
    return dx;
  }
};

// Lin, Chen & Yan 2014 (Network in Network): the mean of each channel's plane.
class GlobalAvgPool final : public ExecLayer {
 public:
  explicit GlobalAvgPool(const std::vector<int64_t>& in_shape) {
    TRAINSIM_CHECK(in_shape.size() == 3, "global avgpool: input is not {C, H, W}");
    channels_ = in_shape[0];
    height_ = in_shape[1];
    width_ = in_shape[2];
    plane_ = height_ * width_;
    TRAINSIM_CHECK(channels_ > 0 && height_ > 0 && width_ > 0, "global avgpool: dimensions must be positive");
  }

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(x.row_size() == channels_ * plane_ || x.rows() == 0, "global avgpool: input size mismatch");
    Tensor y({x.rows(), channels_});
    for (int64_t p = 0; p < x.rows() * channels_; ++p) {
      double sum = 0.0;
      for (int64_t i = 0; i < plane_; ++i) sum += x.data[p * plane_ + i];
      y.data[p] = static_cast<float>(sum / static_cast<double>(plane_));
    }
    cache = LayerCache{};
    return y;
  }

  // Every position of a plane receives dy / (H·W).
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override {
    TRAINSIM_CHECK(dy.row_size() == channels_ || dy.rows() == 0, "global avgpool: dy size mismatch");
    Tensor dx({dy.rows(), channels_, height_, width_});
    for (int64_t p = 0; p < dy.rows() * channels_; ++p) {
      const float share = static_cast<float>(dy.data[p] / static_cast<double>(plane_));
      for (int64_t i = 0; i < plane_; ++i) dx.data[p * plane_ + i] = share;
    }
    return dx;
  }

 private:
  int64_t channels_ = 0, height_ = 0, width_ = 0, plane_ = 0;
};

}  // namespace

std::unique_ptr<ExecLayer> make_batchnorm(std::vector<int64_t> in_shape) {
  return std::make_unique<BatchNorm>(in_shape);
}

std::unique_ptr<ExecLayer> make_layernorm(int64_t features) {
  TRAINSIM_CHECK(features > 0, "layernorm: feature count must be positive");
  return std::make_unique<LayerNorm>(features);
}

std::unique_ptr<ExecLayer> make_gelu() { return std::make_unique<Gelu>(); }

std::unique_ptr<ExecLayer> make_global_avgpool(std::vector<int64_t> in_shape) {
  return std::make_unique<GlobalAvgPool>(in_shape);
}

}  // namespace trainsim
