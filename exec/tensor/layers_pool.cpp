// Max and average pooling over {C, H, W} samples, and the window geometry
// convolution shares.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {

Geometry make_geometry(const std::vector<int64_t>& in_shape, const WindowSpec& window, bool ceil_mode) {
  TRAINSIM_CHECK(in_shape.size() == 3, "window layer: input is not {C, H, W}");
  Geometry g{in_shape[0], in_shape[1], in_shape[2], 0, 0, window};
  g.out_height = window_output_size(g.height, window.kernel_h, window.stride_h, window.pad_h, ceil_mode);
  g.out_width = window_output_size(g.width, window.kernel_w, window.stride_w, window.pad_w, ceil_mode);
  TRAINSIM_CHECK(g.out_height >= 1 && g.out_width >= 1, "window layer: kernel larger than its input");
  return g;
}

namespace {

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

std::unique_ptr<ExecLayer> make_maxpool(std::vector<int64_t> in_shape, const WindowSpec& window) {
  return std::make_unique<MaxPool>(in_shape, window);
}

std::unique_ptr<ExecLayer> make_avgpool(std::vector<int64_t> in_shape, const WindowSpec& window) {
  return std::make_unique<AvgPool>(in_shape, window);
}

}  // namespace trainsim
