// Layers that read several tensors: add (a residual join) and concat; and
// the one-input defaults of ExecLayer's several-input calls and its
// evaluation forward.
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {

Tensor ExecLayer::forward_inputs(const LayerParams& params, std::span<const Tensor* const> xs,
                                 LayerCache& cache) const {
  TRAINSIM_CHECK(xs.size() == 1, "a one-input layer given " + std::to_string(xs.size()) + " inputs");
  return forward(params, *xs[0], cache);
}

std::vector<Tensor> ExecLayer::backward_inputs(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                                               LayerGrads& grads) const {
  std::vector<Tensor> dxs;
  dxs.push_back(backward(params, dy, cache, grads));
  return dxs;
}

Tensor ExecLayer::forward_eval(const LayerParams& params, const LayerParams& /*statistics*/,
                               std::span<const Tensor* const> xs) const {
  LayerCache dropped;
  return forward_inputs(params, xs, dropped);
}

namespace {

// y = Σ x_k; every input's gradient is dy.
class Add final : public ExecLayer {
 public:
  explicit Add(int64_t inputs) : inputs_(inputs) {}

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return x;
  }
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override { return dy; }

  Tensor forward_inputs(const LayerParams&, std::span<const Tensor* const> xs, LayerCache& cache) const override {
    TRAINSIM_CHECK(static_cast<int64_t>(xs.size()) == inputs_, "add: input count differs from the model's");
    Tensor y = *xs[0];
    for (size_t k = 1; k < xs.size(); ++k) {
      TRAINSIM_CHECK(xs[k]->shape == y.shape, "add: inputs of different shapes");
      y.matrix() += xs[k]->matrix();
    }
    cache = LayerCache{};
    return y;
  }
  std::vector<Tensor> backward_inputs(const LayerParams&, const Tensor& dy, const LayerCache&,
                                      LayerGrads&) const override {
    return std::vector<Tensor>(static_cast<size_t>(inputs_), dy);
  }

 private:
  int64_t inputs_;
};

// Each sample's row is its inputs' rows side by side; dy's row splits back.
class Concat final : public ExecLayer {
 public:
  explicit Concat(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {
    for (int64_t size : sizes_) total_ += size;
  }

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    cache = LayerCache{};
    return x;
  }
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override { return dy; }

  Tensor forward_inputs(const LayerParams&, std::span<const Tensor* const> xs, LayerCache& cache) const override {
    TRAINSIM_CHECK(xs.size() == sizes_.size(), "concat: input count differs from the model's");
    const int64_t rows = xs[0]->rows();
    std::vector<int64_t> shape = xs[0]->shape;
    shape[1] = 0;
    for (const Tensor* x : xs) shape[1] += x->shape.at(1);
    Tensor y(shape);
    int64_t column = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      TRAINSIM_CHECK(xs[k]->rows() == rows && (rows == 0 || xs[k]->row_size() == sizes_[k]),
                     "concat: an input of the wrong size");
      if (rows > 0) y.matrix().middleCols(column, sizes_[k]) = xs[k]->matrix();
      column += sizes_[k];
    }
    cache = LayerCache{};
    for (const Tensor* x : xs) cache.saved.emplace_back().shape = x->shape;  // shapes only, for the backward
    return y;
  }
  std::vector<Tensor> backward_inputs(const LayerParams&, const Tensor& dy, const LayerCache& cache,
                                      LayerGrads&) const override {
    TRAINSIM_CHECK(dy.row_size() == total_ && cache.saved.size() == sizes_.size(),
                   "concat: dy does not match the forward's output");
    std::vector<Tensor> dxs;
    int64_t column = 0;
    for (size_t k = 0; k < sizes_.size(); ++k) {
      Tensor dx(cache.saved[k].shape);
      if (dy.rows() > 0) dx.matrix() = dy.matrix().middleCols(column, sizes_[k]);
      column += sizes_[k];
      dxs.push_back(std::move(dx));
    }
    return dxs;
  }

 private:
  std::vector<int64_t> sizes_;
  int64_t total_ = 0;
};

}  // namespace

std::unique_ptr<ExecLayer> make_add(int64_t inputs) {
  TRAINSIM_CHECK(inputs >= 1, "add: needs an input");
  return std::make_unique<Add>(inputs);
}

std::unique_ptr<ExecLayer> make_concat(std::vector<int64_t> sample_sizes) {
  TRAINSIM_CHECK(!sample_sizes.empty(), "concat: needs an input");
  return std::make_unique<Concat>(std::move(sample_sizes));
}

}  // namespace trainsim
