// SGD and momentum SGD (PyTorch's convention), and the gradient utilities
// around them. Arithmetic is float32 like the tensors; the learning rate and
// factors are rounded to float once per step.
#include "exec/optim/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "exec/tensor/sparse_rows.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

void check_range(const Gradients& grads, int64_t first, int64_t last) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()),
                 "layer range [" + std::to_string(first) + ", " + std::to_string(last) + "] outside " +
                     std::to_string(grads.size()) + " layers");
}

// The gradient is all on the host: no part of it still kept on its device.
void check_on_host(const ParamGrad& grad) {
  TRAINSIM_CHECK(grad.kept == nullptr,
                 "a gradient read on the host while its device keeps part of its sum (Device::gradients_to_host)");
}

// Row width of a sparse gradient's values ({rows, width}).
int64_t sparse_width(const ParamGrad& grad) {
  if (grad.row_values.shape.size() >= 2) return grad.row_values.shape[1];
  return grad.rows.empty() ? 0 : grad.row_values.size() / static_cast<int64_t>(grad.rows.size());
}

// dense[rows[i]] += row_values[i] for every listed row.
void scatter_add(const ParamGrad& grad, Tensor& dense) { scatter_add_rows(grad, dense.data, dense.row_size()); }

void add_param_grad(ParamGrad& into, const ParamGrad& from) {
  check_on_host(into);
  check_on_host(from);
  if (!into.sparse && !from.sparse) {
    TRAINSIM_CHECK(into.dense.data.size() == from.dense.data.size(), "adding gradients of different sizes");
    for (size_t i = 0; i < into.dense.data.size(); ++i) into.dense.data[i] += from.dense.data[i];
  } else if (into.sparse && from.sparse) {
    const int64_t width = into.rows.empty() ? sparse_width(from) : sparse_width(into);
    TRAINSIM_CHECK(from.rows.empty() || sparse_width(from) == width, "adding sparse gradients of different widths");
    into.rows.insert(into.rows.end(), from.rows.begin(), from.rows.end());
    into.row_values.data.insert(into.row_values.data.end(), from.row_values.data.begin(),
                                from.row_values.data.end());
    into.row_values.shape = {static_cast<int64_t>(into.rows.size()), width};
  } else if (!into.sparse) {
    scatter_add(from, into.dense);
  } else {
    ParamGrad dense;
    dense.dense = from.dense;
    scatter_add(into, dense.dense);
    into = std::move(dense);
  }
}

}  // namespace

void validate_sgd_options(const SgdOptions& options) {
  if (!std::isfinite(options.learning_rate) || options.learning_rate <= 0) {
    throw InputError("--set learning_rate", "is " + std::to_string(options.learning_rate), "a number > 0");
  }
  if (!std::isfinite(options.momentum) || options.momentum < 0 || options.momentum >= 1) {
    throw InputError("--set momentum", "is " + std::to_string(options.momentum), "a number in [0, 1)");
  }
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0) {
    throw InputError("--set weight_decay", "is " + std::to_string(options.weight_decay), "a number >= 0");
  }
}

Sgd::Sgd(SgdOptions options) : options_(options) { validate_sgd_options(options_); }

void Sgd::step(Weights& weights, const Gradients& grads, int64_t first, int64_t last) {
  check_range(grads, first, last);
  TRAINSIM_CHECK(weights.size() == grads.size(), "weights and gradients cover different layer counts");
  if (velocity_.size() < weights.size()) velocity_.resize(weights.size());
  const bool with_momentum = options_.momentum != 0;
  for (int64_t layer = first; layer <= last; ++layer) {
    LayerParams& params = weights[layer];
    const LayerGrads& layer_grads = grads[layer];
    TRAINSIM_CHECK(params.size() == layer_grads.size(), "layer " + std::to_string(layer) + " has " +
                                                            std::to_string(params.size()) + " parameters but " +
                                                            std::to_string(layer_grads.size()) + " gradients");
    LayerParams& velocity = velocity_[layer];
    if (with_momentum && velocity.size() != params.size()) {
      velocity.clear();
      for (const Tensor& param : params) velocity.emplace_back(param.shape, 0.0f);
    }
    for (size_t p = 0; p < params.size(); ++p) {
      check_on_host(layer_grads[p]);
      TRAINSIM_CHECK(params[p].resident == nullptr, "weights stepped on the host while a device keeps them");
      Tensor* v = with_momentum ? &velocity[p] : nullptr;
      if (layer_grads[p].sparse) {
        step_sparse(params[p], layer_grads[p], v);
      } else {
        step_dense(params[p], layer_grads[p].dense, v);
      }
    }
  }
}

void Sgd::step_dense(Tensor& param, const Tensor& grad, Tensor* velocity) const {
  TRAINSIM_CHECK(param.data.size() == grad.data.size(), "gradient size differs from its parameter's");
  const auto lr = static_cast<float>(options_.learning_rate);
  const auto mu = static_cast<float>(options_.momentum);
  const auto wd = static_cast<float>(options_.weight_decay);
  for (size_t i = 0; i < param.data.size(); ++i) {
    float g = grad.data[i] + wd * param.data[i];
    if (velocity != nullptr) g = velocity->data[i] = mu * velocity->data[i] + g;
    param.data[i] -= lr * g;
  }
}

RowsToStep rows_to_step(const ParamGrad& grad, int64_t table_rows, int64_t width, RowMerge& merge) {
  TRAINSIM_CHECK(grad.rows.empty() || sparse_width(grad) == width, "sparse gradient width differs from its table's");
  const bool distinct = std::adjacent_find(grad.rows.begin(), grad.rows.end(), std::greater_equal<>()) ==
                        grad.rows.end();
  if (distinct) {
    TRAINSIM_CHECK(grad.row_values.data.size() == grad.rows.size() * static_cast<size_t>(width),
                   "sparse gradient holds " + std::to_string(grad.row_values.data.size()) + " values for " +
                       std::to_string(grad.rows.size()) + " rows of width " + std::to_string(width));
    for (const int64_t row : grad.rows) {
      TRAINSIM_CHECK(row >= 0 && row < table_rows,
                     "sparse row " + std::to_string(row) + " outside a table of " + std::to_string(table_rows));
    }
    return {grad.rows, grad.row_values.data};
  }
  const RowMerge::Part part{grad.rows, grad.row_values.data};
  merge.merge({&part, 1}, table_rows, width);
  return {merge.rows(), merge.values()};
}

void Sgd::step_sparse(Tensor& param, const ParamGrad& grad, Tensor* velocity) const {
  const int64_t width = param.row_size();
  thread_local RowMerge merged;
  const RowsToStep step = rows_to_step(grad, param.rows(), width, merged);
  const auto lr = static_cast<float>(options_.learning_rate);
  const auto mu = static_cast<float>(options_.momentum);
  const auto wd = static_cast<float>(options_.weight_decay);
  for (size_t r = 0; r < step.rows.size(); ++r) {
    const int64_t row = step.rows[r];
    float* w = param.data.data() + row * width;
    float* v = velocity == nullptr ? nullptr : velocity->data.data() + row * width;
    const float* g_row = step.values.data() + static_cast<int64_t>(r) * width;
    for (int64_t j = 0; j < width; ++j) {
      // 0 + g as the merge sums it, so a −0 gradient steps as +0 either way.
      float g = (0.0f + g_row[j]) + wd * w[j];
      if (v != nullptr) g = v[j] = mu * v[j] + g;
      w[j] -= lr * g;
    }
  }
}

void add_gradients(Gradients& into, const Gradients& from, int64_t first, int64_t last) {
  check_range(into, first, last);
  check_range(from, first, last);
  for (int64_t layer = first; layer <= last; ++layer) {
    TRAINSIM_CHECK(into[layer].size() == from[layer].size(), "adding gradients of different layers");
    for (size_t p = 0; p < into[layer].size(); ++p) add_param_grad(into[layer][p], from[layer][p]);
  }
}

void scale_gradients(Gradients& grads, float factor, int64_t first, int64_t last) {
  check_range(grads, first, last);
  for (int64_t layer = first; layer <= last; ++layer) {
    for (ParamGrad& grad : grads[layer]) {
      check_on_host(grad);
      auto& values = grad.sparse ? grad.row_values.data : grad.dense.data;
      for (float& value : values) value *= factor;
    }
  }
}

void clear_gradients(Gradients& grads, int64_t first, int64_t last) {
  check_range(grads, first, last);
  for (int64_t layer = first; layer <= last; ++layer) {
    for (ParamGrad& grad : grads[layer]) {
      grad.kept.reset();  // a part the device kept is let go, as zero
      if (grad.sparse) {
        const int64_t width = sparse_width(grad);
        grad.rows.clear();
        grad.row_values.data.clear();
        grad.row_values.shape = {0, width};
      } else {
        std::fill(grad.dense.data.begin(), grad.dense.data.end(), 0.0f);
      }
    }
  }
}

void scatter_add_rows(const ParamGrad& grad, std::span<float> dense, int64_t width) {
  check_on_host(grad);
  TRAINSIM_CHECK(width > 0 && static_cast<int64_t>(dense.size()) % width == 0, "a table of rows of width " +
                                                                                     std::to_string(width));
  TRAINSIM_CHECK(grad.rows.empty() || sparse_width(grad) == width,
                 "sparse gradient width " + std::to_string(sparse_width(grad)) + " vs table width " +
                     std::to_string(width));
  const int64_t table_rows = static_cast<int64_t>(dense.size()) / width;
  for (size_t i = 0; i < grad.rows.size(); ++i) {
    const int64_t row = grad.rows[i];
    TRAINSIM_CHECK(row >= 0 && row < table_rows,
                   "sparse row " + std::to_string(row) + " outside a table of " + std::to_string(table_rows));
    float* out = dense.data() + row * width;
    const float* in = grad.row_values.data.data() + static_cast<int64_t>(i) * width;
    for (int64_t j = 0; j < width; ++j) out[j] += in[j];
  }
}

Tensor densify_gradient(const ParamGrad& grad, const std::vector<int64_t>& param_shape) {
  check_on_host(grad);
  if (!grad.sparse) return grad.dense;
  Tensor dense(param_shape, 0.0f);
  scatter_add(grad, dense);
  return dense;
}

int64_t flat_gradient_size(const Gradients& grads, int64_t first, int64_t last) {
  check_range(grads, first, last);
  int64_t count = 0;
  for (int64_t layer = first; layer <= last; ++layer) {
    for (const ParamGrad& grad : grads[layer]) {
      check_on_host(grad);
      if (!grad.sparse) count += grad.dense.size();
    }
  }
  return count;
}

std::vector<float> flatten_gradients(const Gradients& grads, int64_t first, int64_t last) {
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(flat_gradient_size(grads, first, last)));
  for (int64_t layer = first; layer <= last; ++layer) {
    for (const ParamGrad& grad : grads[layer]) {
      if (!grad.sparse) flat.insert(flat.end(), grad.dense.data.begin(), grad.dense.data.end());
    }
  }
  return flat;
}

namespace {

// Each dense gradient of layers [first, last], in flatten_gradients' order,
// with its slice of `flat`.
template <typename Apply>
void for_each_flat_slice(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last, Apply apply) {
  const int64_t expected = flat_gradient_size(grads, first, last);
  TRAINSIM_CHECK(static_cast<int64_t>(flat.size()) == expected,
                 "flat buffer of " + std::to_string(flat.size()) + " floats for " + std::to_string(expected));
  size_t offset = 0;
  for (int64_t layer = first; layer <= last; ++layer) {
    for (ParamGrad& grad : grads[layer]) {
      if (grad.sparse) continue;
      apply(flat.subspan(offset, grad.dense.data.size()), grad.dense.data);
      offset += grad.dense.data.size();
    }
  }
}

}  // namespace

void unflatten_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last) {
  for_each_flat_slice(flat, grads, first, last, [](std::span<const float> from, std::vector<float>& into) {
    std::copy(from.begin(), from.end(), into.begin());
  });
}

void add_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last) {
  for_each_flat_slice(flat, grads, first, last, [](std::span<const float> from, std::vector<float>& into) {
    for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
  });
}

}  // namespace trainsim
