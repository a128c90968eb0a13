// Weights and gradients of a layer range as flat float buffers.
#include "exec/interpreter/flat_weights.hpp"

#include <algorithm>

#include "exec/optim/sgd.hpp"
#include "model/error.hpp"
#include "model/layer.hpp"

namespace trainsim::interp {
namespace {

// None of the layers' weights is left on a device (Device::weights_to_host first).
void check_on_host(const Weights& weights, int64_t first, int64_t last) {
  for (int64_t l = first; l <= last; ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) {
      TRAINSIM_CHECK(t.resident == nullptr, "weights read on the host while a device keeps them");
    }
  }
}

}  // namespace

std::vector<float> flatten_weights(const Weights& weights, int64_t first, int64_t last) {
  check_on_host(weights, first, last);
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
  check_on_host(weights, first, last);
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

namespace {

// Floats of a gradient in a densified flat buffer: its parameter's (by its
// shape: the values may be a device's, Tensor::resident).
size_t densified_size(const ParamGrad& g, const Tensor& param) {
  return g.sparse ? static_cast<size_t>(element_count(param.shape)) : g.dense.data.size();
}

}  // namespace

std::vector<float> flatten_densified(const Gradients& grads, const Weights& weights, int64_t first, int64_t last) {
  size_t size = 0;
  for (int64_t l = first; l <= last; ++l) {
    const auto& layer = grads[static_cast<size_t>(l)];
    for (size_t p = 0; p < layer.size(); ++p) size += densified_size(layer[p], weights[static_cast<size_t>(l)][p]);
  }
  std::vector<float> flat;
  flat.reserve(size);
  for (int64_t l = first; l <= last; ++l) {
    const auto& layer = grads[static_cast<size_t>(l)];
    for (size_t p = 0; p < layer.size(); ++p) {
      const ParamGrad& g = layer[p];
      if (!g.sparse) {
        flat.insert(flat.end(), g.dense.data.begin(), g.dense.data.end());
        continue;
      }
      const Tensor& table = weights[static_cast<size_t>(l)][p];
      const size_t at = flat.size();
      const size_t n = densified_size(g, table);
      const int64_t rows = table.shape.empty() ? 1 : table.shape.front();
      flat.resize(at + n, 0.0f);
      scatter_add_rows(g, std::span<float>(flat).subspan(at, n), rows == 0 ? 0 : static_cast<int64_t>(n) / rows);
    }
  }
  return flat;
}

void unflatten_densified(std::span<const float> flat, Gradients& grads, const Weights& weights, int64_t first,
                         int64_t last) {
  size_t at = 0;
  for (int64_t l = first; l <= last; ++l) {
    auto& layer = grads[static_cast<size_t>(l)];
    for (size_t p = 0; p < layer.size(); ++p) {
      ParamGrad& g = layer[p];
      const Tensor& param = weights[static_cast<size_t>(l)][p];
      const size_t n = densified_size(g, param);
      TRAINSIM_CHECK(at + n <= flat.size(), "gradient payload shorter than its layers");
      const auto slice = flat.subspan(at, n);
      if (g.sparse) {
        g.dense.shape = param.shape;
        g.dense.data.assign(slice.begin(), slice.end());
        g.sparse = false;
        g.rows.clear();
        g.row_values = Tensor();
      } else {
        std::copy(slice.begin(), slice.end(), g.dense.data.begin());
      }
      at += n;
    }
  }
  TRAINSIM_CHECK(at == flat.size(), "gradient payload longer than its layers");
}

}  // namespace trainsim::interp
