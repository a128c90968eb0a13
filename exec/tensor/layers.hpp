// CPU layer kernels (Eigen, one thread) and the network a model description
// builds. Kernels are stateless: what a forward keeps for its backward lives
// in a LayerCache the caller owns, so a pipeline can hold many micro-batches
// in flight and run a backward with other weights than its forward (weight
// stashing, SpecTrain, DSP).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "exec/tensor/tensor.hpp"
#include "model/layer.hpp"

namespace trainsim {

// What one forward of one layer keeps for its backward.
struct LayerCache {
  std::vector<Tensor> saved;         // e.g. the input, the im2col buffer, the output
  std::vector<int64_t> indices;      // e.g. max-pool argmax positions
  // What the device that ran the forward keeps for the backward (the GPU
  // device's activations), let go with the last cache holding it.
  std::shared_ptr<void> device_state;
};

class ExecLayer {
 public:
  virtual ~ExecLayer() = default;
  // Shapes of the parameters, weights first then bias; empty if none.
  virtual std::vector<std::vector<int64_t>> param_shapes() const { return {}; }
  // Initial values, drawn from `rng`: weights and bias uniform in ±1/sqrt(fan_in)
  // (PyTorch's default for Linear and Conv2d).
  virtual void init_params(LayerParams& params, std::mt19937_64& rng) const;
  // y = f(x; params) for a batch (x.shape[0] samples); fills `cache`.
  virtual Tensor forward(const LayerParams& params, const Tensor& x, LayerCache& cache) const = 0;
  // The same forward of an input the caller has no further use for: a layer
  // that keeps its input for the backward, or returns it reshaped, takes it
  // without a copy. By default the forward above.
  virtual Tensor forward_consuming(const LayerParams& params, Tensor&& x, LayerCache& cache) const {
    return forward(params, x, cache);
  }
  // dL/dx from dL/dy; ADDS dL/dparams into `grads` (sized by init_grads).
  virtual Tensor backward(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                          LayerGrads& grads) const = 0;
  // Whether the weight gradient is sparse (embedding-bag).
  virtual bool sparse() const { return false; }
  // Whether backward reads the parameters (not an embedding's: its gradient
  // is dy scattered to the rows looked up), so a stashed weight version
  // keeps only what its backwards read.
  virtual bool backward_reads_params() const { return true; }
  // A layer reading several tensors (add, concat) overrides these two; the
  // others read one, and the defaults call forward and backward.
  virtual Tensor forward_inputs(const LayerParams& params, std::span<const Tensor* const> xs, LayerCache& cache) const;
  // dL/d(each input), in the order of the forward's xs; ADDS dL/dparams into `grads`.
  virtual std::vector<Tensor> backward_inputs(const LayerParams& params, const Tensor& dy, const LayerCache& cache,
                                              LayerGrads& grads) const;

  // Statistics a layer keeps across training batches without training them
  // (batch norm's running mean and variance): their initial values, empty if
  // none; folding in what a training forward's cache holds; and the
  // evaluation forward that reads them instead of the batch's (by default
  // the training forward, its cache dropped).
  virtual LayerParams init_statistics() const { return {}; }
  virtual void update_statistics(LayerParams& /*statistics*/, const LayerCache& /*cache*/) const {}
  virtual Tensor forward_eval(const LayerParams& params, const LayerParams& statistics,
                              std::span<const Tensor* const> xs) const;
};

// Per model layer, its statistics (ExecLayer::init_statistics).
using Statistics = std::vector<LayerParams>;

// Batch normalization's running statistics after a training batch, as
// PyTorch's BatchNorm (momentum 0.1): running += m·(batch statistic −
// running), the batch's variance made unbiased (count / (count − 1)).
inline constexpr float kBatchNormMomentum = 0.1f;

// A model as exec runs it: one kernel per model layer, same order and names,
// over the model's layer graph. Tensors are named by index: -1 the model's
// input, i the output of layer i.
struct Network {
  std::string model;                              // zoo id
  std::vector<std::string> layer_names;
  std::vector<std::unique_ptr<ExecLayer>> layers; // layers[i] runs model layer i
  std::vector<int64_t> input_shape;               // per sample
  std::vector<std::vector<int64_t>> output_shapes; // per sample, one per layer
  int64_t classes = 0;                            // width of the last layer's output
  std::vector<std::vector<int32_t>> inputs;       // per layer, the tensors it reads
  // cuts[i], i in 0..layers: the tensors live at the boundary before layer i
  // (made before it, read by it or later; at the end, the last layer's
  // output), in increasing order. A pipeline boundary there carries them
  // packed: a lone tensor as it is, several side by side in each sample's
  // row, {batch, Σ sizes} (a residual branch crossing the boundary).
  std::vector<std::vector<int32_t>> cuts;
  std::vector<std::vector<int64_t>> cut_shapes;   // per sample, the packed shape of each cut
  std::vector<int32_t> last_reader;               // per tensor (index + 1): the last layer reading it
};

// Builds the kernels of `model`. Supported ops: linear, conv2d, relu, gelu,
// maxpool, avgpool (windowed or global), flatten, batchnorm, layernorm, add,
// concat (on the first per-sample dimension), embedding_bag (sum of the
// looked-up rows; sparse gradient), dropout (identity), softmax (identity:
// the loss applies it). Layers form a graph (residual branches, concats);
// every layer but the last must be read by a later one. InputError naming
// the model and layer otherwise.
Network build_network(const Model& model);

// Fills a network's cuts, cut_shapes and last_reader from its inputs and
// shapes (build_network does; for networks made by hand). Without inputs,
// the network is a chain, each layer reading the one before.
void link_network(Network& network);

// Every layer's parameters, initialised from `seed` (the same seed gives the
// same weights, bit for bit).
Weights init_weights(const Network& network, uint64_t seed);

// Zeroed gradients shaped like `weights` (dense), or empty sparse ones.
Gradients zero_gradients(const Network& network, const Weights& weights);

// Every layer's initial statistics; and layers [first, last] folding in
// their training forward's caches (caches[i - first] of layer i), as a
// training forward does in PyTorch (a recompute's forward does not).
Statistics init_statistics(const Network& network);
void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                       Statistics& statistics);

// Called with a layer's index as soon as its forward (or backward) is done,
// inside a range: the profiler times each layer of a whole pass this way,
// without cutting the pass at every layer (which would pack and unpack the
// tensors a residual block keeps live, copies a pass does not make).
using AfterLayer = std::function<void(int64_t layer)>;

// Runs layers [first, last] forward from `x`, cut `first`, to cut last + 1
// (packed or in parts, packed_boundary below); caches[i - first] receives
// layer i's cache. A tensor whose
// last reader is a one-input layer goes to that layer's forward_consuming;
// given as an rvalue, `x` too.
Tensor forward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, const Tensor& x,
                     std::vector<LayerCache>& caches, const AfterLayer& after_layer = {});
Tensor forward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor&& x,
                     std::vector<LayerCache>& caches, const AfterLayer& after_layer = {});

// A boundary that several tensors cross comes out of forward_range and
// backward_range as its parts (Tensor::parts), which the next range takes
// without a copy. packed_boundary gives it as one row-major buffer of the
// cut's packed shape, each sample's row holding the tensors' values in the
// cut's order: what a transport carries, and what the ranges also accept.
// A boundary already in one buffer is returned as it is.
Tensor packed_boundary(Tensor boundary);

// The whole network forward in evaluation mode (PyTorch's eval()): layers
// with statistics use them, so each sample's output is its own, whatever
// else is in the batch.
Tensor forward_eval(const Network& network, const Weights& weights, const Statistics& statistics, const Tensor& x);

// And backward from dL/d(cut last + 1) to dL/d(cut first), adding into
// grads; given as an rvalue, dy's tensors are taken (a gradient that passes
// through the range untouched leaves as it came, without a copy).
Tensor backward_range(const Network& network, const Weights& weights, int64_t first, int64_t last,
                      const Tensor& dy, const std::vector<LayerCache>& caches, Gradients& grads,
                      const AfterLayer& after_layer = {});
Tensor backward_range(const Network& network, const Weights& weights, int64_t first, int64_t last, Tensor&& dy,
                      const std::vector<LayerCache>& caches, Gradients& grads, const AfterLayer& after_layer = {});

// Mean softmax cross-entropy over the positions of `logits`, {B, classes} (a
// class per sample) or {B, T, classes} (a label per token, a language
// model's next tokens), against `labels` (one per position, in [0,
// classes)); writes dL/dlogits into `dlogits` when not null.
double softmax_cross_entropy(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits);

// Number of positions of `logits` whose arg-max equals the label.
int64_t count_correct(const Tensor& logits, std::span<const int32_t> labels);

}  // namespace trainsim
