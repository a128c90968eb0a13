// Weights and gradients of a layer range as flat float buffers.
#include "exec/interpreter/flat_weights.hpp"

#include <algorithm>

#include "exec/optim/sgd.hpp"
#include "model/error.hpp"

namespace trainsim::interp {

std::vector<float> flatten_weights(const Weights& weights, int64_t first, int64_t last) {
  size_t size = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) size += t.data.size();
  }
  std::vector<float> flat;
  flat.reserve(size);
  for (int64_t l = first; l <= last; ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) flat.insert(flat.end(), t.data.begin(), t.data.end());
  }
  return flat;
}

void unflatten_weights(std::span<const float> flat, Weights& weights, int64_t first, int64_t last) {
  size_t at = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (Tensor& t : weights[static_cast<size_t>(l)]) {
      TRAINSIM_CHECK(at + t.data.size() <= flat.size(), "weight payload shorter than its layers");
      std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), t.data.size(), t.data.begin());
      at += t.data.size();
    }
  }
  TRAINSIM_CHECK(at == flat.size(), "weight payload longer than its layers");
}

void densify_range(Gradients& grads, const Weights& weights, int64_t first, int64_t last) {
  for (int64_t l = first; l <= last; ++l) {
    for (size_t p = 0; p < grads[static_cast<size_t>(l)].size(); ++p) {
      ParamGrad& g = grads[static_cast<size_t>(l)][p];
      if (!g.sparse) continue;
      g.dense = densify_gradient(g, weights[static_cast<size_t>(l)][p].shape);
      g.sparse = false;
      g.rows.clear();
      g.row_values = Tensor();
    }
  }
}

}  // namespace trainsim::interp
