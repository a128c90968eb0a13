// Embedding-bag: each sample's token ids select rows of a table whose sum is
// the output. Its weight gradient touches only the looked-up rows, so it is
// kept sparse (Parallax, seed 004 §3: sparse variables are aggregated by rows).
#include <cmath>
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

class EmbeddingBag final : public ExecLayer {
 public:
  EmbeddingBag(std::string name, int64_t vocabulary, int64_t dim)
      : name_(std::move(name)), vocabulary_(vocabulary), dim_(dim) {}

  std::vector<std::vector<int64_t>> param_shapes() const override { return {{vocabulary_, dim_}}; }
  bool sparse() const override { return true; }
  bool backward_reads_params() const override { return false; }

  // y[b] = Σ_t table[id(b, t)], padding ids (< 0) skipped.
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    const int64_t batch = x.rows(), tokens = x.row_size();
    Tensor y({batch, dim_});
    cache = LayerCache{};
    cache.indices.assign(static_cast<size_t>(x.size()), -1);
    for (int64_t b = 0; b < batch; ++b) {
      auto yb = Eigen::Map<Eigen::RowVectorXf>(y.data.data() + b * dim_, dim_);
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t id = token_id(x.data[b * tokens + t], b, t);
        if (id < 0) continue;
        cache.indices[b * tokens + t] = id;
        yb += Eigen::Map<const Eigen::RowVectorXf>(params[0].data.data() + id * dim_, dim_);
      }
    }
    cache.saved = {Tensor(x.shape)};  // remembers the input shape for dx
    return y;
  }

  // d table[id] += dy[b] for every non-padding token (b, t): one sparse row each.
  // The ids carry no gradient: dx is zero.
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache& cache, LayerGrads& grads) const override {
    TRAINSIM_CHECK(grads.size() == 1 && grads[0].sparse, name_ + ": gradient is not an empty sparse one");
    const Tensor& x_shape = cache.saved.at(0);
    const int64_t batch = x_shape.rows(), tokens = x_shape.row_size();
    TRAINSIM_CHECK(dy.size() == batch * dim_, name_ + ": dy does not match the output");
    ParamGrad& grad = grads[0];
    append_bag_rows(cache.indices, dy.data, tokens, dim_, grad.rows, grad.row_values.data);
    grad.row_values.shape = {static_cast<int64_t>(grad.rows.size()), dim_};
    return x_shape;
  }

 private:
  // Ids travel as floats, exact for integers below 2^24.
  int64_t token_id(float value, int64_t b, int64_t t) const {
    if (value < 0.0f) return -1;
    if (!(value < static_cast<float>(vocabulary_)) || std::floor(value) != value) {
      throw InputError(name_ + ": input[" + std::to_string(b) + "][" + std::to_string(t) + "]",
                       "token id " + format_number(value),
                       "an integer in [0, " + std::to_string(vocabulary_) + ") or a negative padding id");
    }
    return static_cast<int64_t>(value);
  }

  std::string name_;
  int64_t vocabulary_, dim_;
};

}  // namespace

std::unique_ptr<ExecLayer> make_embedding_bag(std::string name, int64_t vocabulary, int64_t dim) {
  TRAINSIM_CHECK(vocabulary > 0 && dim > 0, name + ": embedding_bag needs a vocabulary and a width");
  return std::make_unique<EmbeddingBag>(std::move(name), vocabulary, dim);
}

}  // namespace trainsim
