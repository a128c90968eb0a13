// measure_profile: per-layer forward and backward medians with exec's CPU
// kernels, each layer timed alone on the activations the layers before it
// produced, optionally with N threads measuring at once.
#include "profiles/profiler/profiler.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "exec/data/batching.hpp"
#include "exec/data/random_bits.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "profiles/profiler/measured_layers.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

// What one thread measures with, and the resulting per-layer medians.
struct LayerBench {
  Network network;
  Weights weights;
  Gradients grads;
  int64_t batch = 0;                 // samples per pass
  std::vector<double> forward_s, backward_s, update_s;
  std::vector<double> sparsity;      // per layer, from its measured backward
  Tensor own_source;                 // random rows, when no data set is given
  const Tensor* source = nullptr;    // the data set the first forward draws its batch from
  std::vector<int32_t> source_labels;
  std::mt19937_64 draws;             // which rows each pass draws
  std::unique_ptr<Sgd> optimizer;    // momentum SGD, as `trainsim run` trains
};

// The dataset the first layer's batches are gathered from: large enough that
// its rows come from memory, not cache, as a real data set's do (Fashion-MNIST
// is 188 MB of floats), small enough to fill quickly.
constexpr int64_t kSourceBytes = int64_t{48} << 20;
constexpr int64_t kSourceMaxRows = 60000;

// The data set (the one given, else random rows), the weights and zeroed
// gradients.
void prepare(LayerBench& bench, const Model& model, int64_t batch, const MeasureOptions& options) {
  const uint64_t seed = options.seed;
  if (options.source != nullptr) {
    bench.source = options.source;
  } else {
    std::mt19937_64 rng(mix_seed(seed, 1));
    const int64_t sample_bytes = static_cast<int64_t>(sizeof(float)) * element_count(model.input_shape);
    const int64_t rows = std::clamp<int64_t>(kSourceBytes / std::max<int64_t>(1, sample_bytes), batch, kSourceMaxRows);
    bench.own_source = random_input(model, rows, rng);
    bench.source = &bench.own_source;
  }
  // Label 0 at every position of the output: one per sample, or one per
  // token of a language model's {T, classes} output.
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  const int64_t per_sample = out.empty() ? 1 : element_count(out) / std::max<int64_t>(1, out.back());
  bench.source_labels.assign(static_cast<size_t>(bench.source->rows() * per_sample), 0);
  bench.draws.seed(mix_seed(seed, 2));
  bench.weights = init_weights(bench.network, seed);
  bench.grads = zero_gradients(bench.network, bench.weights);
  bench.batch = batch;
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

// One timed training pass, as a worker runs it: every layer's forward in
// order on the previous layer's output, the last one's with the softmax
// cross-entropy loss and its gradient; every backward in reverse order on
// the gradient the layer after it produced; then each layer's momentum-SGD
// step and the zeroing of its gradient (layers without weights take none).
// Each layer is timed in place, inside one forward_range and one
// backward_range over the whole graph, so its caches hold what a real step
// leaves there (a layer timed alone, over and over, finds its weights in
// cache) and no tensor is packed between layers.
// Returns per layer (forward, backward, update) seconds.
struct PassTimes {
  std::vector<double> forward_s, backward_s, update_s;
};

PassTimes time_pass(LayerBench& bench, bool last_pass) {
  const auto count = static_cast<int64_t>(bench.network.layers.size());
  PassTimes t;
  t.forward_s.resize(static_cast<size_t>(count));
  t.backward_s.resize(static_cast<size_t>(count));
  t.update_s.assign(static_cast<size_t>(count), 0.0);
  std::vector<LayerCache> caches;
  // The first forward gathers its batch from the data set and takes its rows,
  // as the executor's first forward does.
  const int64_t batch = bench.batch;
  std::vector<int64_t> rows(static_cast<size_t>(batch));
  for (int64_t& r : rows) r = static_cast<int64_t>(uniform_below(bench.draws, static_cast<uint64_t>(bench.source->rows())));
  Tensor gathered, input;
  std::vector<int32_t> labels;
  // Each layer's time runs from the end of the one before (the start of the
  // pass for the first) to its own end, inside one pass over the whole graph.
  double mark_s = now_s();
  const auto lap = [&](std::vector<double>& times) {
    return [&times, &mark_s](int64_t layer) {
      const double end_s = now_s();
      times[static_cast<size_t>(layer)] = end_s - mark_s;
      mark_s = end_s;
    };
  };
  gather_batch(*bench.source, bench.source_labels, rows, gathered, labels);
  input = slice_rows(gathered, {0, batch});
  const Tensor logits = forward_range(bench.network, bench.weights, 0, count - 1, input, caches, lap(t.forward_s));
  // The last forward also takes the loss and its gradient, as the executor's does.
  Tensor dy;
  softmax_cross_entropy(logits, labels, &dy);
  t.forward_s.back() += now_s() - mark_s;
  mark_s = now_s();
  backward_range(bench.network, bench.weights, 0, count - 1, dy, caches, bench.grads, lap(t.backward_s));
  for (int64_t i = 0; i < count; ++i) {
    if (bench.weights[static_cast<size_t>(i)].empty()) continue;
    const double start_s = now_s();
    bench.optimizer->step(bench.weights, bench.grads, i, i);
    const double step_s = now_s() - start_s;
    if (last_pass) bench.sparsity[static_cast<size_t>(i)] = touched_fraction(bench, i);  // untimed
    // zero_grad, as the executor zeroes a set its update releases.
    const double clear_start_s = now_s();
    clear_gradients(bench.grads, i, i);
    t.update_s[static_cast<size_t>(i)] = step_s + (now_s() - clear_start_s);
  }
  return t;
}

void check_options(const Model& model, int64_t batch, const MeasureOptions& options) {
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  check_source(model, options);
  if (options.repeats < 1) throw InputError("--repeats", std::to_string(options.repeats), "at least 1 timed run");
  if (options.warmups < 0) throw InputError("--warmups", std::to_string(options.warmups), "0 or more warm-up runs");
  if (options.concurrent < 1 || options.concurrent > max_worker_threads()) {
    throw InputError("--concurrent", "is " + std::to_string(options.concurrent),
                     "1 to " + std::to_string(max_worker_threads()) + " measuring threads: 4 per core, never over " +
                         std::to_string(kMaxWorkerThreads));
  }
}


// Runs the timed passes at `batch` on `options.concurrent` threads and
// returns thread 0's bench with its per-layer medians. `progress_offset` and
// `progress_total` place these passes in the whole measurement's progress.
LayerBench measure_passes(const Model& model, int64_t batch, const MeasureOptions& options, int64_t progress_offset,
                          int64_t progress_total) {
  // Built here, before any thread starts, so a model exec cannot run fails
  // with its own InputError.
  std::vector<LayerBench> benches(static_cast<size_t>(options.concurrent));
  for (LayerBench& bench : benches) bench.network = build_network(model);
  const auto count = static_cast<int64_t>(model.layers.size());

  run_threads(options.concurrent, [&](int64_t t_index, std::barrier<>& sync) {
    LayerBench& bench = benches[static_cast<size_t>(t_index)];
    prepare(bench, model, batch, options);
    bench.optimizer = std::make_unique<Sgd>(kTimedSgd);
    bench.sparsity.assign(static_cast<size_t>(count), 1.0);
    PassTimes runs;  // per layer, the timed passes one after another
    const int64_t passes = options.warmups + options.repeats;
    for (int64_t r = 0; r < passes; ++r) {
      sync.arrive_and_wait();  // every copy runs its pass at once, as workers do
      const PassTimes t = time_pass(bench, r + 1 == passes);
      if (r >= options.warmups) {
        runs.forward_s.insert(runs.forward_s.end(), t.forward_s.begin(), t.forward_s.end());
        runs.backward_s.insert(runs.backward_s.end(), t.backward_s.begin(), t.backward_s.end());
        runs.update_s.insert(runs.update_s.end(), t.update_s.begin(), t.update_s.end());
      }
      if (t_index == 0 && options.progress) options.progress(progress_offset + r + 1, progress_total);
    }
    bench.forward_s = layer_medians(runs.forward_s, count);
    bench.backward_s = layer_medians(runs.backward_s, count);
    bench.update_s = layer_medians(runs.update_s, count);
  });
  return std::move(benches.front());
}

LayerMedians medians_of(const LayerBench& bench) {
  return {bench.forward_s, bench.backward_s, bench.update_s, bench.sparsity};
}

}  // namespace

Profile measure_profile(const Model& model, int64_t batch, const MeasureOptions& options) {
  check_options(model, batch, options);
  validate_model(model, "model " + model.name);
  const int64_t passes = options.warmups + options.repeats;
  const int64_t small = batch / kSmallBatchDivisor;  // micro-batch size the fixed parts are fitted at
  const int64_t total = small >= 1 ? 2 * passes : passes;
  const LayerBench reported = measure_passes(model, batch, options, 0, total);
  LayerMedians small_medians;
  if (small >= 1) small_medians = medians_of(measure_passes(model, small, options, passes, total));
  const ProfileDevice device{cpu_model_name() + " (" + std::to_string(options.concurrent) + " threads)", "cpu"};
  Profile profile =
      measured_profile(model, batch, medians_of(reported), small, small >= 1 ? &small_medians : nullptr, device);
  add_union_sparsity(model, batch, options, profile);
  return profile;
}

Profile median_profile(const std::vector<Profile>& profiles) {
  TRAINSIM_CHECK(!profiles.empty(), "at least one profile");
  Profile out = profiles.front();
  for (const Profile& p : profiles) {
    TRAINSIM_CHECK(p.batch_size == out.batch_size && p.layers.size() == out.layers.size(),
                   "profiles of one model at one batch");
  }
  const auto median_of = [&](size_t layer, auto field) {
    std::vector<double> samples;
    for (const Profile& p : profiles) samples.push_back(field(p.layers[layer]));
    return median_s(samples);
  };
  // An optional time is folded only when every profile has it.
  const auto median_optional = [&](size_t layer, std::optional<double> LayerProfile::*field) {
    std::vector<double> samples;
    for (const Profile& p : profiles) {
      if (!(p.layers[layer].*field)) return std::optional<double>{};
      samples.push_back(*(p.layers[layer].*field));
    }
    return std::optional<double>{median_s(samples)};
  };
  for (size_t i = 0; i < out.layers.size(); ++i) {
    LayerProfile& l = out.layers[i];
    for (const Profile& p : profiles) TRAINSIM_CHECK(p.layers[i].name == l.name, "profiles of one model");
    l.forward_s = median_of(i, [](const LayerProfile& x) { return x.forward_s; });
    l.backward_s = median_of(i, [](const LayerProfile& x) { return x.backward_s; });
    for (auto field : {&LayerProfile::backward_input_s, &LayerProfile::backward_weight_s, &LayerProfile::update_s,
                       &LayerProfile::forward_fixed_s, &LayerProfile::backward_fixed_s}) {
      l.*field = median_optional(i, field);
    }
  }
  return out;
}

}  // namespace trainsim
