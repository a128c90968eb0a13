// The profilers' shared parts (measured_layers.hpp).
#include "profiles/profiler/measured_layers.hpp"

#include <algorithm>
#include <string>

#include "exec/data/random_bits.hpp"
#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

constexpr double kFp32Bytes = 4.0;

// Uniform float in [-1, 1) from the engine's bits (repeats on every library).
float symmetric_unit(std::mt19937_64& rng) { return static_cast<float>(2.0 * uniform_unit(rng) - 1.0); }

}  // namespace

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
