// Image kernels over {C, H, W} samples: conv2d as im2col + one GEMM per group
// and sample (the im2col buffer is rebuilt in the backward rather than kept,
// so a pipeline holding many micro-batches keeps only their inputs), max and
// average pooling.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

struct Geometry {
  int64_t channels, height, width;  // input, per sample
  int64_t out_height, out_width;
  WindowSpec w;
  int64_t in_plane() const { return height * width; }
  int64_t out_plane() const { return out_height * out_width; }
};

Geometry make_geometry(const std::vector<int64_t>& in_shape, const WindowSpec& window, bool ceil_mode) {
  TRAINSIM_CHECK(in_shape.size() == 3, "window layer: input is not {C, H, W}");
  Geometry g{in_shape[0], in_shape[1], in_shape[2], 0, 0, window};
  g.out_height = window_output_size(g.height, window.kernel_h, window.stride_h, window.pad_h, ceil_mode);
  g.out_width = window_output_size(g.width, window.kernel_w, window.stride_w, window.pad_w, ceil_mode);
  TRAINSIM_CHECK(g.out_height >= 1 && g.out_width >= 1, "window layer: kernel larger than its input");
  return g;
}

class Conv2d final : public ExecLayer {
 public:
  Conv2d(const std::vector<int64_t>& in_shape, int64_t out_channels, const WindowSpec& window, bool bias)
      : g_(make_geometry(in_shape, window, false)), out_channels_(out_channels), bias_(bias) {
    TRAINSIM_CHECK(window.groups >= 1 && g_.channels % window.groups == 0 && out_channels % window.groups == 0,
                   "conv2d: groups must divide both channel counts");
    group_k_ = g_.channels / window.groups * window.kernel_h * window.kernel_w;
  }

  std::vector<std::vector<int64_t>> param_shapes() const override {
    std::vector<std::vector<int64_t>> shapes{
        {out_channels_, g_.channels / g_.w.groups, g_.w.kernel_h, g_.w.kernel_w}};
    if (bias_) shapes.push_back({out_channels_});
    return shapes;
  }

  // Per sample and group: Y_g = W_g · cols_g (+ b), cols the im2col matrix.
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(x.row_size() == g_.channels * g_.in_plane() || x.rows() == 0, "conv2d: input size mismatch");
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
    cache.saved = {x};
    return y;
  }

  // dW_g += dY_g · cols_gᵀ, db += Σ_positions dY, dx = col2im(W_gᵀ · dY_g).
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    const Tensor& x = cache.saved.at(0);
    const int64_t batch = x.rows();
    const int64_t groups = g_.w.groups, out_per_group = out_channels_ / groups;
    TRAINSIM_CHECK(dy.size() == batch * out_channels_ * g_.out_plane(), "conv2d: dy does not match the output");
    TRAINSIM_CHECK(grads.size() == param_shapes().size(), "conv2d: gradients not sized by zero_gradients");
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
};

// The input rows [start, end) a window covers, clipped to the input.
struct Span {
  int64_t begin, end;
};
Span clip(int64_t start, int64_t kernel, int64_t size) {
  return Span{std::max<int64_t>(start, 0), std::min(start + kernel, size)};
}

class MaxPool final : public ExecLayer {
 public:
  MaxPool(const std::vector<int64_t>& in_shape, const WindowSpec& window)
      : g_(make_geometry(in_shape, window, window.ceil_mode)) {}

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(x.row_size() == g_.channels * g_.in_plane() || x.rows() == 0, "maxpool: input size mismatch");
    const int64_t planes = x.rows() * g_.channels;
    Tensor y({x.rows(), g_.channels, g_.out_height, g_.out_width});
    cache = LayerCache{};
    cache.indices.resize(static_cast<size_t>(y.size()));
    // Each window's clipped rows and columns, the same in every plane; the
    // first maximum in row-major order wins, as in PyTorch.
    std::vector<Span> rows(static_cast<size_t>(g_.out_height)), cols(static_cast<size_t>(g_.out_width));
    for (int64_t oh = 0; oh < g_.out_height; ++oh) {
      rows[static_cast<size_t>(oh)] = clip(oh * g_.w.stride_h - g_.w.pad_h, g_.w.kernel_h, g_.height);
      TRAINSIM_CHECK(rows[static_cast<size_t>(oh)].begin < rows[static_cast<size_t>(oh)].end,
                     "maxpool: a window covers only padding");
    }
    for (int64_t ow = 0; ow < g_.out_width; ++ow) {
      cols[static_cast<size_t>(ow)] = clip(ow * g_.w.stride_w - g_.w.pad_w, g_.w.kernel_w, g_.width);
      TRAINSIM_CHECK(cols[static_cast<size_t>(ow)].begin < cols[static_cast<size_t>(ow)].end,
                     "maxpool: a window covers only padding");
    }
    int64_t out = 0;
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t base = p * g_.in_plane();
      for (const Span& hs : rows) {
        for (const Span& ws : cols) {
          int64_t best_index = base + hs.begin * g_.width + ws.begin;
          float best = x.data[best_index];
          for (int64_t h = hs.begin; h < hs.end; ++h) {
            const int64_t row = base + h * g_.width;
            for (int64_t w = ws.begin; w < ws.end; ++w) {
              if (x.data[row + w] > best) best = x.data[row + w], best_index = row + w;
            }
          }
          y.data[out] = best;
          cache.indices[out++] = best_index;
        }
      }
    }
    return y;
  }

  // dL/dx at each window's arg-max receives that window's dL/dy (overlapping windows add).
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache& cache, LayerGrads&) const override {
    TRAINSIM_CHECK(static_cast<size_t>(dy.size()) == cache.indices.size(), "maxpool: dy does not match the output");
    Tensor dx({dy.rows(), g_.channels, g_.height, g_.width});
    for (size_t i = 0; i < cache.indices.size(); ++i) dx.data[cache.indices[i]] += dy.data[i];
    return dx;
  }

 private:
  Geometry g_;
};

class AvgPool final : public ExecLayer {
 public:
  AvgPool(const std::vector<int64_t>& in_shape, const WindowSpec& window)
      : g_(make_geometry(in_shape, window, window.ceil_mode)) {}

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(x.row_size() == g_.channels * g_.in_plane() || x.rows() == 0, "avgpool: input size mismatch");
    Tensor y({x.rows(), g_.channels, g_.out_height, g_.out_width});
    for_each_window(x.rows(), [&](int64_t base, Span hs, Span ws, float divisor, int64_t out) {
      double sum = 0.0;
      for (int64_t h = hs.begin; h < hs.end; ++h) {
        for (int64_t w = ws.begin; w < ws.end; ++w) sum += x.data[base + h * g_.width + w];
      }
      y.data[out] = static_cast<float>(sum) / divisor;
    });
    cache = LayerCache{};
    return y;
  }

  // Each input in a window receives dL/dy / divisor.
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override {
    Tensor dx({dy.rows(), g_.channels, g_.height, g_.width});
    TRAINSIM_CHECK(dy.row_size() == g_.channels * g_.out_plane() || dy.rows() == 0, "avgpool: dy size mismatch");
    for_each_window(dy.rows(), [&](int64_t base, Span hs, Span ws, float divisor, int64_t out) {
      const float share = dy.data[out] / divisor;
      for (int64_t h = hs.begin; h < hs.end; ++h) {
        for (int64_t w = ws.begin; w < ws.end; ++w) dx.data[base + h * g_.width + w] += share;
      }
    });
    return dx;
  }

 private:
  // Calls visit(input plane offset, rows, columns, divisor, output index) per output.
  template <typename Visit>
  void for_each_window(int64_t batch, Visit visit) const {
    const WindowSpec& w = g_.w;
    int64_t out = 0;
    for (int64_t p = 0; p < batch * g_.channels; ++p) {
      for (int64_t oh = 0; oh < g_.out_height; ++oh) {
        const int64_t h0 = oh * w.stride_h - w.pad_h;
        const int64_t h_padded = std::min(h0 + w.kernel_h, g_.height + w.pad_h) - h0;
        for (int64_t ow = 0; ow < g_.out_width; ++ow, ++out) {
          const int64_t w0 = ow * w.stride_w - w.pad_w;
          const int64_t w_padded = std::min(w0 + w.kernel_w, g_.width + w.pad_w) - w0;
          visit(p * g_.in_plane(), clip(h0, w.kernel_h, g_.height), clip(w0, w.kernel_w, g_.width),
                static_cast<float>(h_padded * w_padded), out);
        }
      }
    }
  }

  Geometry g_;
};

}  // namespace

int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

std::unique_ptr<ExecLayer> make_conv2d(std::vector<int64_t> in_shape, int64_t out_channels, const WindowSpec& window,
                                       bool bias) {
  return std::make_unique<Conv2d>(in_shape, out_channels, window, bias);
}

std::unique_ptr<ExecLayer> make_maxpool(std::vector<int64_t> in_shape, const WindowSpec& window) {
  return std::make_unique<MaxPool>(in_shape, window);
}

std::unique_ptr<ExecLayer> make_avgpool(std::vector<int64_t> in_shape, const WindowSpec& window) {
  return std::make_unique<AvgPool>(in_shape, window);
}

}  // namespace trainsim
