// The layer graph: what a model is, independent of any device. Layers are in
// topological order; shapes, parameter counts and FLOPs are per sample, so a
// batch size scales them at the edges (profiles, `zoo show --batch`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainsim {

// Name used in `inputs` for the model's input tensor (the training sample).
inline constexpr const char* kModelInput = "input";

// Geometry of a convolution or pooling window (conv2d, maxpool, avgpool);
// kernel_h == 0 for every other op.
struct WindowSpec {
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t groups = 1;      // conv2d: channel groups
  bool ceil_mode = false;  // pooling: output size rounded up
};

struct Layer {
  std::string name;                   // unique in the model, e.g. "conv1_1"
  std::string op;                     // "conv2d", "linear", "relu", "lstm", ... (see zoo/builder.hpp)
  std::vector<std::string> inputs;    // names of earlier layers, or kModelInput
  std::vector<int64_t> output_shape;  // per sample, e.g. {64, 224, 224} or {20, 512}
  int64_t param_count = 0;            // weights + biases (+ BN scale/shift)
  double forward_flops = 0.0;         // per sample; a multiply-add counts 2
  bool sparse = false;                // gradients touch only some rows (embeddings)
  int64_t sparse_rows = 0;            // sparse layers: rows of the table (vocabulary size)
  double sparse_rows_per_sample = 0;  // sparse layers: rows one sample looks up (tokens)
  WindowSpec window{};                // conv2d / pooling geometry, what an executor needs
  bool bias = true;                   // conv2d / linear: whether param_count includes a bias
  int64_t heads = 0;                  // attention: heads (0 elsewhere)
  bool causal = false;                // attention: each position sees only itself and earlier ones
};

struct Model {
  std::string name;                  // zoo id, e.g. "vgg16"
  std::string description;           // one line: architecture and dataset
  std::vector<int64_t> input_shape;  // per sample, e.g. {3, 224, 224}
  int64_t default_batch = 1;         // the batch the seeds train it with
  std::vector<Layer> layers;         // topological order
};

// Number of elements of a shape (1 for a scalar {}).
int64_t element_count(const std::vector<int64_t>& shape);

// Sum of all layers' parameters.
int64_t param_count(const Model& model);

// Forward FLOPs of one sample through the whole model.
double forward_flops(const Model& model);

// Index of the layer called `name`, if any.
std::optional<size_t> find_layer(const Model& model, const std::string& name);

// Output elements per sample of `name` (the model input or a layer).
int64_t output_elements(const Model& model, const std::string& name);

// The ops a model may use (those the zoo's ModelBuilder writes), sorted.
const std::vector<std::string>& known_ops();

// The one model validation every command relies on: names unique, ops known,
// every layer reading at least one earlier layer or the input, counts
// non-negative and finite, output shapes that fit the op and its inputs'
// shapes, and parameter counts that fit where the shapes fix them (none for
// relu, pooling, add, ...; in·out or in·out + out for linear). Throws
// InputError naming `where` and the field otherwise. What the CPU executor
// can run is narrower (chains of the ops it has kernels for); it says so itself.
void validate_model(const Model& model, const std::string& where);

// Expected fraction of a sparse layer's rows touched by one batch, assuming
// uniformly drawn rows: 1 - (1 - 1/V)^(rows looked up). 1.0 for dense layers.
double sparse_fraction(const Layer& layer, int64_t batch);

}  // namespace trainsim
