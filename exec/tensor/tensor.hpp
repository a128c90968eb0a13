// Float32 tensors for the CPU backend: a row-major buffer with a shape whose
// first dimension is the batch, plus Eigen views of it. Gradients of sparse
// layers (embedding tables) are kept as the touched rows only.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

namespace trainsim {

struct ExportedBoundary;  // exec/tensor/range_network.hpp

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixView = Eigen::Map<RowMajorMatrix>;
using ConstMatrixView = Eigen::Map<const RowMajorMatrix>;

struct Tensor {
  std::vector<int64_t> shape;  // row-major, e.g. {batch, 1, 28, 28} or {out, in} for a weight
  std::vector<float> data;     // element_count(shape) values
  // A network boundary that several tensors cross (a residual block's cut),
  // kept as those tensors in the cut's order while it stays with its worker:
  // `data` is then empty and `shape` is the packed boundary's.
  // packed_boundary (exec/tensor/layers.hpp) makes it one buffer.
  std::vector<Tensor> parts;
  // Set where the values stay on the device that computed them (a GPU's
  // buffers) and `data` is empty: that device reads them in place, and
  // Device::to_host brings them here (exec/tensor/device.hpp).
  std::shared_ptr<void> resident;
  // Set where a device copied the values into memory that another device
  // reads in place (a virtual device on the same GPU: Device::
  // export_boundary) and `data` is empty.
  std::shared_ptr<const ExportedBoundary> exported;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape_in, float fill = 0.0f);

  int64_t size() const { return static_cast<int64_t>(data.size()); }
  int64_t rows() const { return shape.empty() ? 1 : shape.front(); }  // the batch dimension
  int64_t row_size() const { return rows() == 0 ? 0 : size() / rows(); }
  // The buffer as rows() x row_size().
  MatrixView matrix();
  ConstMatrixView matrix() const;
};

// Gradient of one parameter tensor. Dense layers fill `dense` (same shape as
// the parameter); sparse layers (embedding tables) set `sparse` and keep only
// the rows a batch touched: `rows[i]` is the table row of `row_values` row i.
// Rows may repeat; their values add.
struct ParamGrad {
  bool sparse = false;
  Tensor dense;
  std::vector<int64_t> rows;
  Tensor row_values;  // {rows.size(), row width}
  // A part of a dense gradient's sum that its device still keeps (a GPU's
  // memory, where a worker's backwards add into it): the gradient is
  // `dense` plus that part until Device::gradients_to_host adds it in. The
  // host's gradient functions (exec/optim/sgd.hpp) refuse a gradient with
  // one; a copy shares it, and only one copy can take it.
  std::shared_ptr<void> kept;
};

// A layer's parameters (weights, then bias) and the whole model's, one entry
// per model layer (empty for layers without parameters).
using LayerParams = std::vector<Tensor>;
using Weights = std::vector<LayerParams>;
using LayerGrads = std::vector<ParamGrad>;
using Gradients = std::vector<LayerGrads>;

}  // namespace trainsim
