// What the executor's strategy tests share: a strategy's plan for a small
// model on two devices of one machine (or machines of devices), and its run on deterministic data.
// fmnist-mlp trains on a learnable synthetic image batch; text-bag (a 50,000
// x 64 sparse table, then dense 64 -> 64 -> 4) on the synthetic text set.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "exec/data/synthetic_text.hpp"
#include "exec/interpreter.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim::strategy_runs {

inline constexpr int64_t kBatch = 8;  // per device
inline constexpr uint64_t kWeightSeed = 7;

// A deterministic learnable global batch: label (3·iteration + row) mod 10;
// pixels a hash of (iteration, row, element) plus a bright band of 78
// pixels chosen by the label, so a classifier can learn the label.
inline void synthetic_batch(int32_t iteration, int64_t rows, Tensor& x, std::vector<int32_t>& y) {
  x = Tensor({rows, 1, 28, 28});
  y.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t label = static_cast<int32_t>((3 * iteration + r) % 10);
    y[static_cast<size_t>(r)] = label;
    for (int64_t e = 0; e < 784; ++e) {
      const uint64_t h = (static_cast<uint64_t>(iteration) * 1000003u + static_cast<uint64_t>(r) * 7919u +
                          static_cast<uint64_t>(e) * 104729u) %
                         1000u;
      const float band = e / 78 == label ? 1.0f : 0.0f;
      x.data[static_cast<size_t>(r * 784 + e)] = static_cast<float>(h) / 2000.0f - 0.25f + band;
    }
  }
}

// Global batch i of the synthetic text set: rows i·n .. i·n + n − 1 (wrapping).
inline BatchSource text_batches() {
  auto data =
      std::make_shared<Dataset>(make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 5));
  return whole_batches([data](int32_t iteration, int64_t rows, Tensor& x, std::vector<int32_t>& y) {
    x = Tensor({rows, kTextTokensPerSample});
    y.resize(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t src = (iteration * rows + i) % data->train_x.rows();
      std::copy_n(data->train_x.data.begin() + src * kTextTokensPerSample, kTextTokensPerSample,
                  x.data.begin() + i * kTextTokensPerSample);
      y[static_cast<size_t>(i)] = data->train_y[static_cast<size_t>(src)];
    }
  });
}

inline Cluster two_devices() {
  Cluster c = load_cluster("p40x4-pcie3");
  c.devices_per_machine = 2;
  return c;
}

struct StrategyRun {
  Plan plan;
  ExecResult result;
  std::map<OpId, Weights> read;  // weights each compute op read, when recorded
};

struct RunSpec {
  std::string strategy{};
  int64_t batch = kBatch;
  std::vector<std::pair<std::string, std::string>> settings{};
  int32_t iterations = 5;
  SgdOptions sgd{0.1, 0.0, 0.0};
  bool record_weights = false;
  bool text = false;  // text-bag on the synthetic text set, not fmnist-mlp on synthetic images
  // Another model than fmnist-mlp or text-bag, and its batches (default:
  // synthetic_batch's images), when set.
  std::function<Model()> make_model{};
  WholeBatchSource make_batch{};
  int32_t machines = 1;  // of `per_machine` devices each
  int32_t per_machine = 2;
  // Each worker's device (ExecOptions::make_device; the CPU's when unset).
  std::function<std::unique_ptr<Device>(int32_t worker)> make_device{};
  // The transport (ExecOptions::make_transport; in-process when unset).
  std::function<std::unique_ptr<Transport>(int endpoints)> make_transport{};
  bool time_device_work = false;  // ExecOptions::time_device_work
};

inline Model model_of(const RunSpec& spec) {
  if (spec.make_model) return spec.make_model();
  return build_zoo_model(spec.text ? "text-bag" : "fmnist-mlp");
}

// 0 flatten, 1 fc1, 2 ln, 3 act, 4 fc2, 5 res = fc2 + fc1, 6 act2, 7 out.
inline Model residual_mlp() {
  ModelBuilder b("residual-mlp", "test", {1, 28, 28}, 8);
  const std::string fc1 = b.linear("fc1", b.flatten("flatten", kModelInput), 32);
  const std::string act = b.activation("act", "gelu", b.layernorm("ln", fc1));
  const std::string res = b.add("res", {b.linear("fc2", act, 32), fc1});
  b.linear("out", b.activation("act2", "gelu", res), 10);
  return std::move(b).build();
}

// 0 flatten, 1 fc1, 2 bn, 3 act, 4 out.
inline Model batchnorm_mlp() {
  ModelBuilder b("bn-mlp", "test", {1, 28, 28}, 8);
  const std::string fc1 = b.linear("fc1", b.flatten("flatten", kModelInput), 16);
  b.linear("out", b.activation("act", "relu", b.batchnorm("bn", fc1)), 10);
  return std::move(b).build();
}

// Byte sequences of fortunes-gpt's context: token (5·iteration + 3·row + t)
// mod 7 + 97, labelled by the next one, a pattern the decoder can learn.
inline void byte_batch(int32_t iteration, int64_t rows, Tensor& x, std::vector<int32_t>& y) {
  constexpr int64_t kContext = 64;
  x = Tensor({rows, kContext});
  y.resize(static_cast<size_t>(rows * kContext));
  const auto token = [&](int64_t r, int64_t t) { return static_cast<int32_t>((5 * iteration + 3 * r + t) % 7 + 97); };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < kContext; ++t) {
      x.data[static_cast<size_t>(r * kContext + t)] = static_cast<float>(token(r, t));
      y[static_cast<size_t>(r * kContext + t)] = token(r, t + 1);
    }
  }
}

// The strategy's plan for the spec's model, batch, settings and iterations.
inline Plan plan_of(const RunSpec& spec) {
  const Model model = model_of(spec);
  Cluster cluster = two_devices();
  cluster.machines = spec.machines;
  cluster.devices_per_machine = spec.per_machine;
  const Profile profile = analytic_profile(model, spec.batch, cluster);
  StrategyConfig config;
  for (const auto& [key, value] : spec.settings) config.set(key, value, "--set " + key);
  return generate_plan(find_strategy(spec.strategy, "--strategy"), profile, cluster, config, spec.iterations);
}

// Runs `plan` (the spec's, or one changed from it) from the spec's seed on
// its data; or, given `resume`, from that state, its iteration 0 being the
// data's iteration `first_iteration`. keep_state: ExecOptions::keep_state.
inline StrategyRun execute(const RunSpec& spec, Plan plan, int32_t first_iteration = 0,
                           const RunState* resume = nullptr, bool keep_state = false) {
  const Network network = build_network(model_of(spec));
  const Weights initial = init_weights(network, kWeightSeed);
  StrategyRun r;
  r.plan = std::move(plan);
  ExecOptions options;
  options.batch_size = spec.batch;
  options.sgd = spec.sgd;
  options.recv_timeout_s = 30;
  options.resume = resume;
  options.keep_state = keep_state;
  options.make_device = spec.make_device;
  options.make_transport = spec.make_transport;
  options.time_device_work = spec.time_device_work;
  std::mutex mu;
  if (spec.record_weights) {
    options.on_weights_read = [&](OpId id, const Weights& w) {
      std::lock_guard lock(mu);
      r.read[id] = w;
    };
  }
  const BatchSource all = spec.text         ? text_batches()
                          : spec.make_batch ? whole_batches(spec.make_batch)
                                            : whole_batches(synthetic_batch);
  const BatchSource batches = [&](int32_t iteration, int64_t rows, RowRange range, Tensor* x,
                                  std::vector<int32_t>* y) { all(iteration + first_iteration, rows, range, x, y); };
  r.result = execute_plan(r.plan, network, initial, batches, options);
  return r;
}

inline StrategyRun run(const RunSpec& spec) { return execute(spec, plan_of(spec)); }

// The largest |a - b| over every parameter of two weight sets of one shape.
inline double largest_weight_gap(const Weights& a, const Weights& b) {
  double gap = 0;
  for (size_t l = 0; l < a.size(); ++l) {
    for (size_t p = 0; p < a[l].size(); ++p) {
      for (size_t i = 0; i < a[l][p].data.size(); ++i) {
        gap = std::max(gap, static_cast<double>(std::fabs(a[l][p].data[i] - b[l][p].data[i])));
      }
    }
  }
  return gap;
}

// Two runs train alike: every iteration's loss and the final weights within 1e-4.
inline void expect_same_training(const ExecResult& reference, const ExecResult& other, const std::string& what) {
  ASSERT_EQ(reference.loss_per_iteration.size(), other.loss_per_iteration.size());
  for (size_t i = 0; i < reference.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(other.loss_per_iteration[i], reference.loss_per_iteration[i], 1e-4) << what << ", iteration " << i;
  }
  EXPECT_LT(largest_weight_gap(reference.weights, other.weights), 1e-4) << what;
}

inline StrategyRun run_text(const std::string& strategy, int64_t batch, int32_t iterations,
                            const std::vector<std::pair<std::string, std::string>>& settings = {}) {
  return run({.strategy = strategy, .batch = batch, .settings = settings, .iterations = iterations,
              .sgd = {0.1, 0.9, 0.0}, .text = true});
}

inline constexpr SgdOptions kMomentum{0.1, 0.9, 0.0};

struct StrategyCase {
  std::string name;  // a test name: letters, digits, underscores
  RunSpec spec;
};

// Every strategy (PlanErased, Checkpoints), with the settings that exercise what its plan must carry:
// both dp-ps servers, pipesgd's compressed AllReduce with stale weights,
// PipeDream's stashed versions, SpecTrain's predictions, DSP's
// recomputation, and Parallax's three exchanges on a model with a sparse table.
inline const std::vector<StrategyCase>& cases() {
  static const std::vector<StrategyCase> all = {
      {"single", {.strategy = "single", .sgd = kMomentum}},
      {"dp_ps_device", {.strategy = "dp-ps", .settings = {{"server", "device"}}, .sgd = kMomentum}},
      {"dp_ps_host", {.strategy = "dp-ps", .settings = {{"server", "host"}}, .sgd = kMomentum}},
      {"dp_ring", {.strategy = "dp-ring", .sgd = kMomentum}},
      {"dp_overlap", {.strategy = "dp-overlap", .sgd = kMomentum}},
      {"pipesgd_quant8",
       {.strategy = "pipesgd", .settings = {{"width", "2"}, {"compression", "quant8"}}, .sgd = kMomentum}},
      {"pipesgd_trunc16",
       {.strategy = "pipesgd",
        .settings = {{"width", "2"}, {"compression", "trunc16"}, {"segments", "2"}},
        .sgd = kMomentum}},
      {"cgdp", {.strategy = "cgdp", .sgd = kMomentum}},
      {"pipedream", {.strategy = "pipedream", .iterations = 6, .sgd = kMomentum}},
      {"pipedream_sync", {.strategy = "pipedream-sync", .iterations = 6, .sgd = kMomentum}},
      {"dualpipe_spectrain", {.strategy = "dualpipe", .settings = {{"spectrain", "true"}}, .iterations = 6}},
      {"gpipe", {.strategy = "gpipe", .settings = {{"microbatches", "2"}}, .sgd = kMomentum}},
      {"one_f_one_b", {.strategy = "1f1b", .settings = {{"microbatches", "4"}}, .sgd = kMomentum}},
      {"one_f_one_b_interleaved",
       {.strategy = "1f1b", .settings = {{"microbatches", "4"}, {"chunks", "2"}}, .sgd = kMomentum}},
      {"dsp", {.strategy = "dsp", .iterations = 6, .sgd = kMomentum}},
      {"parallax_hybrid", {.strategy = "parallax", .settings = {{"mode", "hybrid"}}, .sgd = kMomentum, .text = true}},
      {"parallax_ps", {.strategy = "parallax", .settings = {{"mode", "ps"}}, .sgd = kMomentum, .text = true}},
      {"parallax_ar", {.strategy = "parallax", .settings = {{"mode", "ar"}}, .sgd = kMomentum, .text = true}},
  };
  return all;
}

// The spec of cases()'s case `name` (std::logic_error for none).
inline const RunSpec& case_named(const std::string& name) {
  for (const StrategyCase& c : cases()) {
    if (c.name == name) return c.spec;
  }
  throw std::logic_error("no strategy case " + name);
}

// Boundaries of several tensors (a residual branch crossing the cut: their
// gradients gather from both sides) and batch normalization's statistics.
inline const std::vector<StrategyCase>& graph_cases() {
  static const std::vector<StrategyCase> all = {
      {"single_residual", {.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = residual_mlp}},
      {"dp_ring_residual", {.strategy = "dp-ring", .sgd = {0.1, 0.9, 0.0}, .make_model = residual_mlp}},
      {"gpipe_across_the_residual",
       {.strategy = "gpipe",
        .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = residual_mlp}},
      {"one_f_one_b_across_the_residual",
       {.strategy = "1f1b",
        .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = residual_mlp}},
      {"single_batchnorm", {.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = batchnorm_mlp}},
      {"gpipe_batchnorm",
       {.strategy = "gpipe",
        .settings = {{"microbatches", "1"}, {"stages", "0-1,2-4"}},
        .sgd = {0.1, 0.9, 0.0},
        .make_model = batchnorm_mlp}},
  };
  return all;
}

inline void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

}  // namespace trainsim::strategy_runs
