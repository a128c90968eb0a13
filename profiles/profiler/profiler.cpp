// measure_profile: per-layer forward and backward medians with exec's CPU
// kernels, each layer timed alone on the activations the layers before it
// produced, optionally with N threads measuring at once.
#include "profiles/profiler/profiler.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "exec/data/random_bits.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

constexpr double kFp32Bytes = 4.0;

// What one thread measures: each layer's input, an output gradient to feed
// its backward, and the resulting per-layer medians.
struct LayerBench {
  Network network;
  Weights weights;
  Gradients grads;
  std::vector<Tensor> inputs;        // inputs[i]: what layer i reads
  std::vector<Tensor> output_grads;  // output_grads[i]: dL/d(output of layer i), random
  std::vector<double> forward_s, backward_s, update_s;
  std::vector<double> sparsity;      // per layer, from its measured backward
  std::unique_ptr<Sgd> optimizer;    // momentum SGD, as `trainsim run` trains
};

// The optimizer the update is timed with: `trainsim run`'s defaults. The
// learning rate is small so the repeated steps barely move the weights.
constexpr SgdOptions kTimedSgd{1e-4, 0.9, 0.0};

// Uniform float in [-1, 1) from the engine's bits (repeats on every library).
float symmetric_unit(std::mt19937_64& rng) { return static_cast<float>(2.0 * uniform_unit(rng) - 1.0); }

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  Tensor t(std::move(shape));
  for (float& v : t.data) v = symmetric_unit(rng);
  return t;
}

// A batch of the model's input: token ids when the first layer looks rows up.
Tensor random_input(const Model& model, int64_t batch, std::mt19937_64& rng) {
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  const Layer& first = model.layers.front();
  if (first.op != "embedding_bag" || first.sparse_rows <= 0) return random_tensor(shape, rng);
  Tensor ids(shape);
  for (float& v : ids.data) v = static_cast<float>(uniform_below(rng, static_cast<uint64_t>(first.sparse_rows)));
  return ids;
}

// Runs the whole network once to get every layer's input, and draws an
// output gradient per layer.
void prepare(LayerBench& bench, const Model& model, int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(mix_seed(seed, 1));
  bench.weights = init_weights(bench.network, seed);
  bench.grads = zero_gradients(bench.network, bench.weights);
  const auto count = static_cast<int64_t>(bench.network.layers.size());
  Tensor x = random_input(model, batch, rng);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<LayerCache> caches;
    Tensor y = forward_range(bench.network, bench.weights, i, i, x, caches);
    bench.output_grads.push_back(random_tensor(y.shape, rng));
    bench.inputs.push_back(std::move(x));
    x = std::move(y);
  }
}

// Fraction of a sparse layer's table rows its gradient touched (at least one
// row, so validate_profile's (0, 1] holds); 1 for dense layers.
double touched_fraction(const LayerBench& bench, int64_t i) {
  const LayerGrads& grads = bench.grads[static_cast<size_t>(i)];
  if (grads.empty() || !grads[0].sparse) return 1.0;
  const Tensor& table = bench.weights[static_cast<size_t>(i)][0];
  const std::set<int64_t> distinct(grads[0].rows.begin(), grads[0].rows.end());
  const double rows = static_cast<double>(std::max<int64_t>(1, table.rows()));
  return std::clamp(static_cast<double>(distinct.size()) / rows, 1.0 / rows, 1.0);
}

// Times layer i: each run is one forward (timed), then one backward from its
// cache (timed), then the momentum-SGD step of its weights with that gradient
// (timed; layers without weights take no step). Sparse gradients are emptied
// between runs, untimed, so each backward appends one batch of rows as in
// training.
void time_layer(LayerBench& bench, int64_t i, const MeasureOptions& options) {
  std::vector<double> forward_s, backward_s, update_s;
  const bool has_weights = !bench.weights[static_cast<size_t>(i)].empty();
  for (int64_t r = 0; r < options.warmups + options.repeats; ++r) {
    std::vector<LayerCache> caches;
    Tensor y;  // outlives the timed region: training keeps activations too
    const double start_s = now_s();
    y = forward_range(bench.network, bench.weights, i, i, bench.inputs[static_cast<size_t>(i)], caches);
    const double forward_end_s = now_s();
    const double backward_start_s = now_s();
    backward_range(bench.network, bench.weights, i, i, bench.output_grads[static_cast<size_t>(i)], caches,
                   bench.grads);
    const double backward_end_s = now_s();
    if (has_weights) bench.optimizer->step(bench.weights, bench.grads, i, i);
    const double update_end_s = now_s();
    if (r >= options.warmups) {
      forward_s.push_back(forward_end_s - start_s);
      backward_s.push_back(backward_end_s - backward_start_s);
      update_s.push_back(has_weights ? update_end_s - backward_end_s : 0.0);
    }
    if (r + 1 == options.warmups + options.repeats) bench.sparsity[static_cast<size_t>(i)] = touched_fraction(bench, i);
    if (bench.network.layers[static_cast<size_t>(i)]->sparse()) clear_gradients(bench.grads, i, i);
  }
  bench.forward_s[static_cast<size_t>(i)] = median_s(forward_s);
  bench.backward_s[static_cast<size_t>(i)] = median_s(backward_s);
  bench.update_s[static_cast<size_t>(i)] = median_s(update_s);
}

void check_options(int64_t batch, const MeasureOptions& options) {
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  if (options.repeats < 1) throw InputError("--repeats", std::to_string(options.repeats), "at least 1 timed run");
  if (options.warmups < 0) throw InputError("--warmups", std::to_string(options.warmups), "0 or more warm-up runs");
  if (options.concurrent < 1) {
    throw InputError("--concurrent", std::to_string(options.concurrent), "at least 1 measuring thread");
  }
}

}  // namespace

Profile measure_profile(const Model& model, int64_t batch, const MeasureOptions& options) {
  check_options(batch, options);
  validate_model(model, "model " + model.name);
  // Built here, before any thread starts, so a model exec cannot run fails
  // with its own InputError.
  std::vector<LayerBench> benches(static_cast<size_t>(options.concurrent));
  for (LayerBench& bench : benches) bench.network = build_network(model);
  const auto count = static_cast<int64_t>(model.layers.size());

  run_threads(options.concurrent, [&](int64_t t, std::barrier<>& sync) {
    LayerBench& bench = benches[static_cast<size_t>(t)];
    prepare(bench, model, batch, options.seed);
    bench.forward_s.assign(static_cast<size_t>(count), 0.0);
    bench.backward_s.assign(static_cast<size_t>(count), 0.0);
    bench.update_s.assign(static_cast<size_t>(count), 0.0);
    bench.optimizer = std::make_unique<Sgd>(kTimedSgd);
    bench.sparsity.assign(static_cast<size_t>(count), 1.0);
    for (int64_t i = 0; i < count; ++i) {
      sync.arrive_and_wait();  // every copy works on the same layer at once
      time_layer(bench, i, options);
      if (t == 0 && options.progress) options.progress(i + 1, count);
    }
  });

  const LayerBench& reported = benches.front();
  Profile profile;
  profile.model = model.name;
  profile.device = {cpu_model_name() + " (" + std::to_string(options.concurrent) + " threads)", "cpu"};
  profile.batch_size = batch;
  profile.dtype = "fp32";
  profile.source = "measured";
  for (int64_t i = 0; i < count; ++i) {
    const Layer& layer = model.layers[static_cast<size_t>(i)];
    LayerProfile l;
    l.name = layer.name;
    l.inputs = layer.inputs;
    l.forward_s = reported.forward_s[static_cast<size_t>(i)];
    l.backward_s = reported.backward_s[static_cast<size_t>(i)];
    l.update_s = reported.update_s[static_cast<size_t>(i)];
    l.param_bytes = kFp32Bytes * static_cast<double>(layer.param_count);
    l.activation_bytes =
        kFp32Bytes * static_cast<double>(batch) * static_cast<double>(element_count(layer.output_shape));
    l.sparse = layer.sparse;
    l.sparsity = reported.sparsity[static_cast<size_t>(i)];
    l.flops = layer.forward_flops * static_cast<double>(batch);
    profile.layers.push_back(std::move(l));
  }
  validate_profile(profile, "measured profile of " + model.name);
  return profile;
}

}  // namespace trainsim
