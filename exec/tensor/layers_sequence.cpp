// Sequence kernels of Transformers over {T, d} per sample: multi-head
// self-attention, token embedding and the sinusoidal position encoding.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

using RowVectorView = Eigen::Map<Eigen::RowVectorXf>;
using ConstRowVectorView = Eigen::Map<const Eigen::RowVectorXf>;

std::string sequence_shape(int64_t tokens, int64_t dim) {
  return "{B, " + std::to_string(tokens) + ", " + std::to_string(dim) + "}";
}

bool is_sequence(const Tensor& t, int64_t tokens, int64_t dim) {
  return t.shape.size() == 3 && t.shape[1] == tokens && t.shape[2] == dim;
}

// Vaswani et al. 2017 §3.2.2: multi-head scaled dot-product self-attention.
// The default init_params draws W then b for each projection, bound
// 1/sqrt(d) (fan_in d for all eight tensors): four torch.nn.Linear(d, d).
class Attention final : public ExecLayer {
 public:
  Attention(int64_t tokens, int64_t dim, int64_t heads, bool causal)
      : tokens_(tokens), dim_(dim), heads_(heads), head_dim_(dim / heads), causal_(causal),
        scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim / heads)))) {}

  std::vector<std::vector<int64_t>> param_shapes() const override {
    return {{dim_, dim_}, {dim_}, {dim_, dim_}, {dim_}, {dim_, dim_}, {dim_}, {dim_, dim_}, {dim_}};
  }

  // Q, K, V = x·Wᵀ + b; per sample and head P = softmax(Q_h·K_hᵀ·scale, masked),
  // O_h = P·V_h; y = concat(O_h)·W_oᵀ + b_o. Keeps x, Q, K, V, P and the concat.
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    check_params(params);
    TRAINSIM_CHECK(is_sequence(x, tokens_, dim_), "attention: input is not " + sequence_shape(tokens_, dim_));
    const int64_t batch = x.rows(), positions = batch * tokens_;
    Tensor q = project(params, 0, x), k = project(params, 2, x), v = project(params, 4, x);
    Tensor probs({batch, heads_, tokens_, tokens_});
    Tensor concat(x.shape);
    ConstMatrixView qm(q.data.data(), positions, dim_), km(k.data.data(), positions, dim_),
        vm(v.data.data(), positions, dim_);
    MatrixView cm(concat.data.data(), positions, dim_);
    RowMajorMatrix scores(tokens_, tokens_);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t row = b * tokens_, col = h * head_dim_;
        scores.noalias() = qm.block(row, col, tokens_, head_dim_) * km.block(row, col, tokens_, head_dim_).transpose();
        MatrixView p(probs.data.data() + (b * heads_ + h) * tokens_ * tokens_, tokens_, tokens_);
        for (int64_t t = 0; t < tokens_; ++t) softmax_row(scores, t, p);
        cm.block(row, col, tokens_, head_dim_).noalias() = p * vm.block(row, col, tokens_, head_dim_);
      }
    }
    Tensor y = project(params, 6, concat);
    cache = LayerCache{};
    keep(cache, x, std::move(q), std::move(k), std::move(v), std::move(probs), std::move(concat));
    return y;
  }

  // Per sample and head, with dO_h from dy·W_o: dV_h = Pᵀ·dO_h, dP = dO_h·V_hᵀ,
  // dS = P ⊙ (dP - rowsum(P ⊙ dP))·scale, dQ_h = dS·K_h, dK_h = dSᵀ·Q_h; then
  // every projection adds dW += doutᵀ·in, db += Σ_rows dout, and dx sums dQ·W_q,
  // dK·W_k and dV·W_v.
  Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                  LayerGrads& grads) const override {
    check_params(params);
    check_grads(grads);
    TRAINSIM_CHECK(cache.saved.size() == 6, "attention: the cache is not from this layer's forward");
    const Tensor& x = cache.saved[0];
    const Tensor &q = cache.saved[1], &k = cache.saved[2], &v = cache.saved[3];
    const Tensor &probs = cache.saved[4], &concat = cache.saved[5];
    TRAINSIM_CHECK(dy.shape == x.shape, "attention: dy does not match the forward's output");
    const int64_t batch = x.rows(), positions = batch * tokens_;
    Tensor dconcat(x.shape), dq(x.shape), dk(x.shape), dv(x.shape);
    project_backward(params, 6, concat, dy, grads, dconcat);
    ConstMatrixView qm(q.data.data(), positions, dim_), km(k.data.data(), positions, dim_),
        vm(v.data.data(), positions, dim_), dcm(dconcat.data.data(), positions, dim_);
    MatrixView dqm(dq.data.data(), positions, dim_), dkm(dk.data.data(), positions, dim_),
        dvm(dv.data.data(), positions, dim_);
    RowMajorMatrix dp(tokens_, tokens_), ds(tokens_, tokens_);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t row = b * tokens_, col = h * head_dim_;
        ConstMatrixView p(probs.data.data() + (b * heads_ + h) * tokens_ * tokens_, tokens_, tokens_);
        const auto d_out = dcm.block(row, col, tokens_, head_dim_);
        dvm.block(row, col, tokens_, head_dim_).noalias() = p.transpose() * d_out;
        dp.noalias() = d_out * vm.block(row, col, tokens_, head_dim_).transpose();
        const Eigen::ArrayXf row_dot = (p.array() * dp.array()).rowwise().sum();
        ds = (p.array() * (dp.array().colwise() - row_dot)) * scale_;
        dqm.block(row, col, tokens_, head_dim_).noalias() = ds * km.block(row, col, tokens_, head_dim_);
        dkm.block(row, col, tokens_, head_dim_).noalias() = ds.transpose() * qm.block(row, col, tokens_, head_dim_);
      }
    }
    Tensor dx(x.shape);
    project_backward(params, 0, x, dq, grads, dx);
    project_backward(params, 2, x, dk, grads, dx);
    project_backward(params, 4, x, dv, grads, dx);
    return dx;
  }

 private:
  // p[t] = softmax(scores[t]·scale) over s, s > t masked out when causal; the
  // row max is subtracted first.
  void softmax_row(const RowMajorMatrix& scores, int64_t t, MatrixView& p) const {
    const int64_t seen = causal_ ? t + 1 : tokens_;
    const float top = scores.row(t).head(seen).maxCoeff() * scale_;
    double sum = 0.0;
    for (int64_t s = 0; s < seen; ++s) {
      p(t, s) = std::exp(scores(t, s) * scale_ - top);
      sum += p(t, s);
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t s = 0; s < seen; ++s) p(t, s) *= inv;
    for (int64_t s = seen; s < tokens_; ++s) p(t, s) = 0.0f;
  }

  // in·W[w]ᵀ + b[w + 1] over every position of `in`.
  Tensor project(const LayerParams& params, size_t w, const Tensor& in) const {
    const int64_t positions = in.size() / dim_;
    Tensor out(in.shape);
    ConstMatrixView im(in.data.data(), positions, dim_);
    ConstMatrixView wm(params[w].data.data(), dim_, dim_);
    MatrixView om(out.data.data(), positions, dim_);
    om.noalias() = im * wm.transpose();
    om.rowwise() += ConstRowVectorView(params[w + 1].data.data(), dim_);
    return out;
  }

  // dW[w] += doutᵀ·in, db[w + 1] += Σ_rows dout, din += dout·W[w].
  void project_backward(const LayerParams& params, size_t w, const Tensor& in, const Tensor& dout, LayerGrads& grads,
                        Tensor& din) const {
    const int64_t positions = in.size() / dim_;
    ConstMatrixView im(in.data.data(), positions, dim_), dm(dout.data.data(), positions, dim_);
    ConstMatrixView wm(params[w].data.data(), dim_, dim_);
    MatrixView(grads[w].dense.data.data(), dim_, dim_).noalias() += dm.transpose() * im;
    RowVectorView(grads[w + 1].dense.data.data(), dim_) += dm.colwise().sum();
    MatrixView(din.data.data(), positions, dim_).noalias() += dm * wm;
  }

  void check_params(const LayerParams& params) const {
    const auto shapes = param_shapes();
    TRAINSIM_CHECK(params.size() == shapes.size(), "attention: needs W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o");
    for (size_t i = 0; i < shapes.size(); ++i) {
      TRAINSIM_CHECK(params[i].shape == shapes[i], "attention: parameter " + std::to_string(i) + " has the wrong shape");
    }
  }

  void check_grads(const LayerGrads& grads) const {
    const auto shapes = param_shapes();
    TRAINSIM_CHECK(grads.size() == shapes.size(), "attention: gradients not sized by zero_gradients");
    for (size_t i = 0; i < shapes.size(); ++i) {
      TRAINSIM_CHECK(!grads[i].sparse && grads[i].dense.shape == shapes[i],
                     "attention: gradient " + std::to_string(i) + " has the wrong shape");
    }
  }

  int64_t tokens_, dim_, heads_, head_dim_;
  bool causal_;
  float scale_;  // 1/sqrt(d/heads)
};

// torch.nn.Embedding: each id selects a table row; N(0, 1) init; dense gradient.
class Embedding final : public ExecLayer {
 public:
  Embedding(std::string name, int64_t vocabulary, int64_t dim)
      : name_(std::move(name)), vocabulary_(vocabulary), dim_(dim) {}

  std::vector<std::vector<int64_t>> param_shapes() const override { return {{vocabulary_, dim_}}; }

  // N(0, 1) by Box-Muller over two 24-bit uniforms per pair of values, so the
  // same engine state gives the same table with every standard library.
  void init_params(LayerParams& params, std::mt19937_64& rng) const override {
    Tensor table({vocabulary_, dim_});
    for (int64_t i = 0; i < table.size(); i += 2) {
      const double u1 = 1.0 - unit(rng), u2 = unit(rng);  // u1 in (0, 1]
      const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
      table.data[i] = static_cast<float>(radius * std::cos(angle));
      if (i + 1 < table.size()) table.data[i + 1] = static_cast<float>(radius * std::sin(angle));
    }
    params = {std::move(table)};
  }

  // y[b][t] = table[id(b, t)]; the ids go in the cache.
  Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(params.size() == 1 && params[0].shape == (std::vector<int64_t>{vocabulary_, dim_}),
                   name_ + ": table is not {" + std::to_string(vocabulary_) + ", " + std::to_string(dim_) + "}");
    std::vector<int64_t> out_shape = x.shape;
    out_shape.push_back(dim_);
    Tensor y(out_shape);
    cache = LayerCache{};
    cache.indices.resize(static_cast<size_t>(x.size()));
    const int64_t tokens = x.row_size();
    for (int64_t i = 0; i < x.size(); ++i) {
      const int64_t id = token_id(x.data[i], i / tokens, i % tokens);
      cache.indices[i] = id;
      RowVectorView(y.data.data() + i * dim_, dim_) = ConstRowVectorView(params[0].data.data() + id * dim_, dim_);
    }
    cache.saved = {Tensor(x.shape)};  // remembers the input shape for dx
    return y;
  }

  // d table[id(b, t)] += dy[b][t] (repeated ids add up); the ids carry no gradient.
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache& cache, LayerGrads& grads) const override {
    TRAINSIM_CHECK(grads.size() == 1 && !grads[0].sparse &&
                       grads[0].dense.shape == (std::vector<int64_t>{vocabulary_, dim_}),
                   name_ + ": gradient not sized by zero_gradients");
    const Tensor& x_shape = cache.saved.at(0);
    TRAINSIM_CHECK(dy.size() == x_shape.size() * dim_, name_ + ": dy does not match the output");
    for (int64_t i = 0; i < x_shape.size(); ++i) {
      RowVectorView(grads[0].dense.data.data() + cache.indices[i] * dim_, dim_) +=
          ConstRowVectorView(dy.data.data() + i * dim_, dim_);
    }
    return x_shape;
  }

 private:
  // k / 2^24 in [0, 1), exact: uniform_from_bits gives (2k / 2^24 - 1).
  static double unit(std::mt19937_64& rng) { return 0.5 * (1.0 + static_cast<double>(uniform_from_bits(rng, 1.0f))); }

  // Ids travel as floats, exact for integers below 2^24.
  int64_t token_id(float value, int64_t b, int64_t t) const {
    if (!(value >= 0.0f && value < static_cast<float>(vocabulary_)) || std::floor(value) != value) {
      throw InputError(name_ + ": input[" + std::to_string(b) + "][" + std::to_string(t) + "]",
                       "token id " + format_number(value), "an integer in [0, " + std::to_string(vocabulary_) + ")");
    }
    return static_cast<int64_t>(value);
  }

  std::string name_;
  int64_t vocabulary_, dim_;
};

// Vaswani et al. 2017 §3.5: y = x + PE, the {T, d} table computed once.
class PositionalEncoding final : public ExecLayer {
 public:
  PositionalEncoding(int64_t tokens, int64_t dim) : tokens_(tokens), dim_(dim), table_({tokens, dim}) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t j = 0; j < dim; ++j) {
        const double exponent = static_cast<double>(j - j % 2) / static_cast<double>(dim);
        const double angle = static_cast<double>(t) / std::pow(10000.0, exponent);
        table_.data[t * dim + j] = static_cast<float>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
      }
    }
  }

  Tensor forward(const LayerParams&, const Tensor& x, LayerCache& cache) const override {
    TRAINSIM_CHECK(is_sequence(x, tokens_, dim_),
                   "positional encoding: input is not " + sequence_shape(tokens_, dim_));
    Tensor y(x.shape);
    MatrixView(y.data.data(), x.rows(), table_.size()) =
        ConstMatrixView(x.data.data(), x.rows(), table_.size()).rowwise() +
        ConstRowVectorView(table_.data.data(), table_.size());
    cache = LayerCache{};
    return y;
  }

  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override {
    TRAINSIM_CHECK(is_sequence(dy, tokens_, dim_), "positional encoding: dy is not " + sequence_shape(tokens_, dim_));
    return dy;
  }

 private:
  int64_t tokens_, dim_;
  Tensor table_;  // PE, {T, d}
};

}  // namespace

std::unique_ptr<ExecLayer> make_attention(int64_t tokens, int64_t dim, int64_t heads, bool causal) {
  TRAINSIM_CHECK(tokens > 0 && dim > 0 && heads > 0, "attention: tokens, width and heads must be positive");
  TRAINSIM_CHECK(dim % heads == 0,
                 "attention: width " + std::to_string(dim) + " is not divisible by " + std::to_string(heads) + " heads");
  return std::make_unique<Attention>(tokens, dim, heads, causal);
}

std::unique_ptr<ExecLayer> make_embedding(std::string name, int64_t vocabulary, int64_t dim) {
  TRAINSIM_CHECK(vocabulary > 0 && dim > 0, name + ": embedding needs a vocabulary and a width");
  return std::make_unique<Embedding>(std::move(name), vocabulary, dim);
}

std::unique_ptr<ExecLayer> make_positional_encoding(int64_t tokens, int64_t dim) {
  TRAINSIM_CHECK(tokens > 0 && dim > 0, "positional encoding: tokens and width must be positive");
  return std::make_unique<PositionalEncoding>(tokens, dim);
}

}  // namespace trainsim
