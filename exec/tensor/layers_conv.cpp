// Convolution over {C, H, W} samples: through oneDNN where it is there
// (conv_onednn.hpp), else, and as the reference, im2col and one matrix
// product per group and sample (the im2col buffer is rebuilt in the backward rather than
// kept, so a pipeline holding many micro-batches keeps only their inputs).
// Per sample, a plane's im2col matrix stays in cache between its making and
// its product; a chunk of samples side by side in one matrix was tried and
// was no faster (fmnist-resnet20) or up to 2x slower (fmnist-cnn at 64).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "exec/tensor/conv_onednn.hpp"
#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

class Conv2d final : public KeepsInput {
 public:
  Conv2d(const std::vector<int64_t>& in_shape, int64_t out_channels, const WindowSpec& window, bool bias,
         Kernels kernels)
      : g_(make_geometry(in_shape, window, false)), out_channels_(out_channels), bias_(bias) {
    TRAINSIM_CHECK(window.groups >= 1 && g_.channels % window.groups == 0 && out_channels % window.groups == 0,
                   "conv2d: groups must divide both channel counts");
    group_k_ = g_.channels / window.groups * window.kernel_h * window.kernel_w;
    if (kernels == Kernels::fastest) onednn_ = OneDnnConv::make(g_, out_channels_, bias_);
  }

  std::vector<std::vector<int64_t>> param_shapes() const override {
    std::vector<std::vector<int64_t>> shapes{
        {out_channels_, g_.channels / g_.w.groups, g_.w.kernel_h, g_.w.kernel_w}};
    if (bias_) shapes.push_back({out_channels_});
    return shapes;
  }

  // Per sample and group: Y_g = W_g · cols_g (+ b), cols the im2col matrix.
  Tensor apply(const LayerParams& params, const Tensor& x) const override {
    TRAINSIM_CHECK(x.row_size() == g_.channels * g_.in_plane() || x.rows() == 0, "conv2d: input size mismatch");
    if (onednn_ != nullptr && x.rows() > 0) return onednn_->forward(params, x);
    const int64_t batch = x.rows();
    const int64_t groups = g_.w.groups, out_per_group = out_channels_ / groups;
    Tensor y({batch, out_channels_, g_.out_height, g_.out_width});
    std::vector<float> cols(static_cast<size_t>(groups * group_k_ * g_.out_plane()));
    for (int64_t b = 0; b < batch; ++b) {
      im2col(x.data.data() + b * x.row_size(), cols.data());
      float* yb = y.data.data() + b * y.row_size();
      for (int64_t gi = 0; gi < groups; ++gi) {
        ConstMatrixView w(params[0].data.data() + gi * out_per_group * group_k_, out_per_group, group_k_);
        ConstMatrixView c(cols.data() + gi * group_k_ * g_.out_plane(), group_k_, g_.out_plane());
        MatrixView(yb + gi * out_per_group * g_.out_plane(), out_per_group, g_.out_plane()).noalias() = w * c;
      }
      if (bias_) {
        MatrixView(yb, out_channels_, g_.out_plane()).colwise() +=
            Eigen::Map<const Eigen::VectorXf>(params[1].data.data(), out_channels_);
      }
    }
    return y;
  }

  // dW_g += dY_g · cols_gᵀ, db += Σ_positions dY, dx = col2im(W_gᵀ · dY_g).
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    const Tensor& x = cache.saved.at(0);
    TRAINSIM_CHECK(grads.size() == param_shapes().size(), "conv2d: gradients not sized by zero_gradients");
    if (onednn_ != nullptr && x.rows() > 0) return onednn_->backward(params, x, dy, grads);
    const int64_t batch = x.rows();
    const int64_t groups = g_.w.groups, out_per_group = out_channels_ / groups;
    TRAINSIM_CHECK(dy.size() == batch * out_channels_ * g_.out_plane(), "conv2d: dy does not match the output");
    Tensor dx(x.shape);
    std::vector<float> cols(static_cast<size_t>(groups * group_k_ * g_.out_plane()));
    std::vector<float> dcols(cols.size());
    for (int64_t b = 0; b < batch; ++b) {
      im2col(x.data.data() + b * x.row_size(), cols.data());
      const float* dyb = dy.data.data() + b * dy.row_size();
      for (int64_t gi = 0; gi < groups; ++gi) {
        ConstMatrixView dyg(dyb + gi * out_per_group * g_.out_plane(), out_per_group, g_.out_plane());
        ConstMatrixView c(cols.data() + gi * group_k_ * g_.out_plane(), group_k_, g_.out_plane());
        ConstMatrixView w(params[0].data.data() + gi * out_per_group * group_k_, out_per_group, group_k_);
        MatrixView(grads[0].dense.data.data() + gi * out_per_group * group_k_, out_per_group, group_k_).noalias() +=
            dyg * c.transpose();
        MatrixView(dcols.data() + gi * group_k_ * g_.out_plane(), group_k_, g_.out_plane()).noalias() =
            w.transpose() * dyg;
      }
      if (bias_) {
        Eigen::Map<Eigen::VectorXf>(grads[1].dense.data.data(), out_channels_) +=
            ConstMatrixView(dyb, out_channels_, g_.out_plane()).rowwise().sum();
      }
      col2im(dcols.data(), dx.data.data() + b * dx.row_size());
    }
    return dx;
  }

 private:
  // The output columns [begin, end) whose input column ow·sw − pw + j lies
  // inside the image; the others read padding.
  struct Columns {
    int64_t begin, end;
  };
  Columns inside_columns(int64_t j) const {
    const WindowSpec& w = g_.w;
    const int64_t shift = j - w.pad_w;  // input column of ow = 0
    const int64_t begin = shift >= 0 ? 0 : (-shift + w.stride_w - 1) / w.stride_w;
    const int64_t end = g_.width - 1 - shift < 0 ? 0 : (g_.width - 1 - shift) / w.stride_w + 1;
    return {std::min(begin, g_.out_width), std::clamp(end, std::min(begin, g_.out_width), g_.out_width)};
  }

  // cols[(c·kh + i)·kw + j][oh·Wo + ow] = x[c][oh·sh - ph + i][ow·sw - pw + j], 0 outside:
  // each output row's inside columns copied as one run, the padding zeroed.
  void im2col(const float* x, float* cols) const {
    const WindowSpec& w = g_.w;
    for (int64_t j = 0; j < w.kernel_w; ++j) {
      const Columns in = inside_columns(j);
      for (int64_t c = 0; c < g_.channels; ++c) {
        for (int64_t i = 0; i < w.kernel_h; ++i) {
          float* row = cols + ((c * w.kernel_h + i) * w.kernel_w + j) * g_.out_plane();
          for (int64_t oh = 0; oh < g_.out_height; ++oh) {
            float* out = row + oh * g_.out_width;
            const int64_t h = oh * w.stride_h - w.pad_h + i;
            if (h < 0 || h >= g_.height || in.begin == in.end) {
              std::fill(out, out + g_.out_width, 0.0f);
              continue;
            }
            std::fill(out, out + in.begin, 0.0f);
            std::fill(out + in.end, out + g_.out_width, 0.0f);
            const float* src = x + (c * g_.height + h) * g_.width + in.begin * w.stride_w + j - w.pad_w;
            if (w.stride_w == 1) {
              std::copy(src, src + (in.end - in.begin), out + in.begin);
            } else {
              for (int64_t ow = in.begin; ow < in.end; ++ow) out[ow] = src[(ow - in.begin) * w.stride_w];
            }
          }
        }
      }
    }
  }

  // The adjoint of im2col: every column entry adds into the input it was read from.
  void col2im(const float* dcols, float* dx) const {
    const WindowSpec& w = g_.w;
    for (int64_t j = 0; j < w.kernel_w; ++j) {
      const Columns in = inside_columns(j);
      if (in.begin == in.end) continue;
      for (int64_t c = 0; c < g_.channels; ++c) {
        for (int64_t i = 0; i < w.kernel_h; ++i) {
          const float* row = dcols + ((c * w.kernel_h + i) * w.kernel_w + j) * g_.out_plane();
          for (int64_t oh = 0; oh < g_.out_height; ++oh) {
            const int64_t h = oh * w.stride_h - w.pad_h + i;
            if (h < 0 || h >= g_.height) continue;
            const float* from = row + oh * g_.out_width;
            float* to = dx + (c * g_.height + h) * g_.width + in.begin * w.stride_w + j - w.pad_w;
            if (w.stride_w == 1) {
              for (int64_t ow = in.begin; ow < in.end; ++ow) to[ow - in.begin] += from[ow];
            } else {
              for (int64_t ow = in.begin; ow < in.end; ++ow) to[(ow - in.begin) * w.stride_w] += from[ow];
            }
          }
        }
      }
    }
  }

  Geometry g_;
  int64_t out_channels_;
  bool bias_;
  int64_t group_k_ = 0;  // rows of one group's im2col block: C/groups·kh·kw
  std::unique_ptr<OneDnnConv> onednn_;  // null: im2col
};

}  // namespace

std::unique_ptr<ExecLayer> make_conv2d(std::vector<int64_t> in_shape, int64_t out_channels, const WindowSpec& window,
                                       bool bias, Kernels kernels) {
  return std::make_unique<Conv2d>(in_shape, out_channels, window, bias, kernels);
}

}  // namespace trainsim
