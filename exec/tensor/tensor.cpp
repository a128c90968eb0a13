// Tensor storage and views, and the default parameter initialisation every
// kernel with weights shares.
#include "exec/tensor/tensor.hpp"

#include <algorithm>
#include <cmath>

#include "exec/tensor/kernels_impl.hpp"
#include "model/error.hpp"

namespace trainsim {

Tensor::Tensor(std::vector<int64_t> shape_in, float fill) : shape(std::move(shape_in)) {
  for (int64_t dim : shape) TRAINSIM_CHECK(dim >= 0, "tensor dimension " + std::to_string(dim) + " < 0");
  data.assign(static_cast<size_t>(element_count(shape)), fill);
}

MatrixView Tensor::matrix() { return MatrixView(data.data(), rows(), row_size()); }

ConstMatrixView Tensor::matrix() const { return ConstMatrixView(data.data(), rows(), row_size()); }

float uniform_from_bits(std::mt19937_64& rng, float bound) {
  // 24 bits fill a float mantissa exactly: u = k / 2^24 in [0, 1).
  constexpr double kTwoPow24 = 16777216.0;
  const double u = static_cast<double>(rng() >> 40) / kTwoPow24;
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

// PyTorch's default for Linear and Conv2d: kaiming_uniform_(a = sqrt(5)) on the
// weight, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = the product of
// the weight's dimensions after the first (in, or in/groups·kh·kw), and the
// same bound for the bias. The weight is drawn first, then the bias.
void ExecLayer::init_params(LayerParams& params, std::mt19937_64& rng) const {
  const auto shapes = param_shapes();
  params.clear();
  if (shapes.empty()) return;
  int64_t fan_in = 1;
  for (size_t d = 1; d < shapes.front().size(); ++d) fan_in *= shapes.front()[d];
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1))));
  for (const auto& shape : shapes) {
    Tensor tensor(shape);
    for (float& value : tensor.data) value = uniform_from_bits(rng, bound);
    params.push_back(std::move(tensor));
  }
}

}  // namespace trainsim
