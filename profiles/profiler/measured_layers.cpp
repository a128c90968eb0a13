// The profilers' shared parts (measured_layers.hpp).
#include "profiles/profiler/measured_layers.hpp"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

#include "exec/data/batching.hpp"
#include "exec/data/random_bits.hpp"
#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

constexpr double kFp32Bytes = 4.0;

// Uniform float in [-1, 1) from the engine's bits (repeats on every library).
float symmetric_unit(std::mt19937_64& rng) { return static_cast<float>(2.0 * uniform_unit(rng) - 1.0); }

// A sparse first layer that looks rows up by the input's token ids.
bool looks_up_sparse_rows(const Layer& first) {
  return first.sparse && (first.op == "embedding" || first.op == "embedding_bag") && first.sparse_rows >= 1;
}

// The workers whose batches' union of rows the profile measures: 2, 4, ..., this.
constexpr int64_t kUnionWorkers = 16;

// A first layer looking rows up by the input's token ids: the fraction of
// its table the batches of 2, 4, ..., kUnionWorkers workers touch together,
// each batch drawn as a pass draws its rows (empty for any other model).
std::vector<double> union_sparsity(const Model& model, int64_t batch, const MeasureOptions& options) {
  const Layer& first = model.layers.front();
  if (!looks_up_sparse_rows(first)) return {};
  std::mt19937_64 draws(mix_seed(options.seed, 3));
  const Tensor drawn = options.source != nullptr ? Tensor() : random_input(model, kUnionWorkers * batch, draws);
  const Tensor& source = options.source != nullptr ? *options.source : drawn;
  const int64_t width = source.row_size();
  std::vector<uint8_t> touched(static_cast<size_t>(first.sparse_rows), 0);
  int64_t distinct = 0;
  std::vector<double> fractions;
  for (int64_t sample = 0; sample < kUnionWorkers * batch; ++sample) {
    const int64_t row = options.source != nullptr
                            ? static_cast<int64_t>(uniform_below(draws, static_cast<uint64_t>(source.rows())))
                            : sample;
    for (int64_t k = 0; k < width; ++k) {
      const auto id = static_cast<int64_t>(source.data[static_cast<size_t>(row * width + k)]);
      if (id < 0 || id >= first.sparse_rows) continue;  // the layer's own check refuses it when it runs
      distinct += touched[static_cast<size_t>(id)] == 0;
      touched[static_cast<size_t>(id)] = 1;
    }
    const int64_t batches = (sample + 1) / batch;
    if ((sample + 1) % batch == 0 && batches >= 2 && std::has_single_bit(static_cast<uint64_t>(batches))) {
      fractions.push_back(static_cast<double>(distinct) / static_cast<double>(first.sparse_rows));
    }
  }
  return fractions;
}

}  // namespace

void check_source(const Model& model, const MeasureOptions& options) {
  if (options.source != nullptr &&
      (options.source->rows() < 1 || options.source->row_size() != element_count(model.input_shape))) {
    throw InputError("--dataset", "its samples do not fit " + model.name + "'s input",
                     "a data set of samples shaped as the model's input");
  }
}

Tensor measured_batch(const Model& model, int64_t batch, const MeasureOptions& options) {
  if (options.source == nullptr) {
    std::mt19937_64 rng(mix_seed(options.seed, 1));
    return random_input(model, batch, rng);
  }
  check_source(model, options);
  std::mt19937_64 draws(mix_seed(options.seed, 2));
  std::vector<int64_t> rows(static_cast<size_t>(batch));
  for (int64_t& r : rows) r = static_cast<int64_t>(uniform_below(draws, static_cast<uint64_t>(options.source->rows())));
  const std::vector<int32_t> no_labels(static_cast<size_t>(options.source->rows()), 0);
  Tensor x;
  std::vector<int32_t> labels;
  gather_batch(*options.source, no_labels, rows, x, labels);
  return x;
}

std::vector<double> batch_sparsity(const Model& model, const Tensor& x) {
  std::vector<double> sparsity(model.layers.size(), 1.0);
  const Layer& first = model.layers.front();
  if (!looks_up_sparse_rows(first)) return sparsity;
  std::set<int64_t> touched;
  for (const float v : x.data) {
    if (v >= 0.0f && v < static_cast<float>(first.sparse_rows)) touched.insert(static_cast<int64_t>(v));
  }
  const auto rows = static_cast<double>(first.sparse_rows);
  sparsity.front() = std::clamp(static_cast<double>(touched.size()) / rows, 1.0 / rows, 1.0);
  return sparsity;
}

void add_union_sparsity(const Model& model, int64_t batch, const MeasureOptions& options, Profile& profile) {
  LayerProfile& first = profile.layers.front();
  for (const double f : union_sparsity(model, batch, options)) {  // never below what fewer workers touch
    first.union_sparsity.push_back(
        std::max(f, first.union_sparsity.empty() ? first.sparsity : first.union_sparsity.back()));
  }
}

Tensor random_input(const Model& model, int64_t batch, std::mt19937_64& rng) {
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  const Layer& first = model.layers.front();
  const bool looks_up = first.op == "embedding_bag" || first.op == "embedding";
  Tensor t(shape);
  if (!looks_up || first.sparse_rows <= 0) {
    for (float& v : t.data) v = symmetric_unit(rng);
    return t;
  }
  for (float& v : t.data) v = static_cast<float>(uniform_below(rng, static_cast<uint64_t>(first.sparse_rows)));
  return t;
}

std::vector<double> layer_medians(const std::vector<double>& times, int64_t count) {
  std::vector<double> medians(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    std::vector<double> samples;
    for (size_t at = static_cast<size_t>(i); at < times.size(); at += static_cast<size_t>(count)) samples.push_back(times[at]);
    medians[static_cast<size_t>(i)] = median_s(samples);
  }
  return medians;
}

double fixed_part_s(double t, double t_small, int64_t batch, int64_t small) {
  const auto b = static_cast<double>(batch);
  const auto s = static_cast<double>(small);
  return std::clamp((t_small * b - t * s) / (b - s), 0.0, t);
}

Profile measured_profile(const Model& model, int64_t batch, const LayerMedians& at_batch, int64_t small,
                         const LayerMedians* at_small, ProfileDevice device) {
  Profile profile;
  profile.model = model.name;
  profile.device = std::move(device);
  profile.batch_size = batch;
  profile.dtype = "fp32";
  profile.source = "measured";
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    LayerProfile l;
    l.name = layer.name;
    l.inputs = layer.inputs;
    l.forward_s = at_batch.forward_s[i];
    l.backward_s = at_batch.backward_s[i];
    l.update_s = at_batch.update_s[i];
    if (at_small != nullptr) {
      l.forward_fixed_s = fixed_part_s(l.forward_s, at_small->forward_s[i], batch, small);
      l.backward_fixed_s = fixed_part_s(l.backward_s, at_small->backward_s[i], batch, small);
    }
    l.param_bytes = kFp32Bytes * static_cast<double>(layer.param_count);
    l.activation_bytes =
        kFp32Bytes * static_cast<double>(batch) * static_cast<double>(element_count(layer.output_shape));
    l.sparse = layer.sparse;
    l.sparsity = at_batch.sparsity.empty() ? 1.0 : at_batch.sparsity[i];
    l.flops = layer.forward_flops * static_cast<double>(batch);
    profile.layers.push_back(std::move(l));
  }
  validate_profile(profile, "measured profile of " + model.name);
  return profile;
}

}  // namespace trainsim
