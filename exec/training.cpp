// A training run end to end; see training.hpp.
#include "exec/training.hpp"

#include <algorithm>
#include <limits>
#include <mutex>
#include <thread>

#include "exec/data/batching.hpp"
#include "model/error.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/des/summary.hpp"

namespace trainsim {
namespace {

// Test-set evaluation batch: large enough to amortise, small enough for caches.
constexpr int64_t kEvaluationRows = 1000;

// The hosts' count where `host_of_worker` fills each host in order with the
// same number of workers (0, 0, 1, 1), else 1.
int64_t machines_in_order(int64_t workers, const std::vector<int>& host_of_worker) {
  const auto n = static_cast<int64_t>(host_of_worker.size());
  if (n != workers || n == 0) return 1;
  const int64_t machines = host_of_worker.back() + 1;
  if (machines < 1 || workers % machines != 0) return 1;
  for (int64_t w = 0; w < n; ++w) {
    if (host_of_worker[static_cast<size_t>(w)] != w / (workers / machines)) return 1;
  }
  return machines;
}

}  // namespace

Cluster nominal_cpu_cluster(int64_t workers, const std::vector<int>& host_of_worker) {
  // Round figures for one core of a current server CPU and memory copies
  // between threads; only the partition and chunk searches read them.
  const int64_t machines = machines_in_order(workers, host_of_worker);
  Cluster c;
  c.name = machines == 1 ? "cpu" + std::to_string(workers)
                         : "cpu" + std::to_string(machines) + "x" + std::to_string(workers / machines);
  c.description = "this machine's CPU, " + std::to_string(workers) + " worker threads, nominal figures";
  if (machines > 1) {
    c.description = std::to_string(machines) + " machines' CPUs, " + std::to_string(workers / machines) +
                    " workers on each, nominal figures";
  }
  c.machines = machines;
  c.devices_per_machine = workers / machines;
  c.device = {"cpu thread", "cpu", 4e9, 50e9, 10e9};
  c.intra_link = {5e9, 2e-6};
  c.inter_link = c.intra_link;
  c.host = {5e9, 2e-6, 5e9, std::max<int64_t>(1, std::thread::hardware_concurrency()), 0};
  c.collective = {5e9, 2e-6};
  return c;
}

IterationStats iteration_stats(const std::vector<double>& iteration_end_s, int32_t period, int32_t drain) {
  IterationStats s;
  const auto n = static_cast<int32_t>(iteration_end_s.size());
  if (n == 0) return s;
  const SteadyState steady = steady_state(iteration_end_s, resolve_warmup_iterations(-1, n), period, drain);
  s.median_s = steady.iteration_s;
  s.min_s = steady.min_s;
  s.max_s = steady.max_s;
  s.warmup = steady.warmup;
  return s;
}

double test_accuracy(const Network& network, const Weights& weights, const Statistics& statistics,
                     const Dataset& data) {
  const int64_t samples = data.test_x.rows();
  if (samples == 0) return 0;
  int64_t correct = 0;
  for (int64_t first = 0; first < samples; first += kEvaluationRows) {
    const RowRange rows{first, std::min(kEvaluationRows, samples - first)};
    const Tensor logits = forward_eval(network, weights, statistics, slice_rows(data.test_x, rows));
    const std::vector<int32_t> labels = slice_labels(data.test_y, rows, data.labels_per_sample);
    correct += count_correct(logits, labels);
  }
  return static_cast<double>(correct) / static_cast<double>(samples * data.labels_per_sample);
}

namespace {

// What a stretch adds to the run so far: each worker's memory peak the most
// of its stretches' (each stretch makes its devices afresh), the traffic
// summed.
void add_stretch(const ExecResult& stretch, std::vector<Device::MemoryUse>& memory, TrafficStats& traffic) {
  if (memory.size() < stretch.memory.size()) memory.resize(stretch.memory.size());
  for (size_t w = 0; w < stretch.memory.size(); ++w) {
    memory[w].peak_bytes = std::max(memory[w].peak_bytes, stretch.memory[w].peak_bytes);
    if (stretch.memory[w].limit_bytes >= 0) memory[w].limit_bytes = stretch.memory[w].limit_bytes;
  }
  const auto add = [](std::vector<std::vector<int64_t>>& into, const std::vector<std::vector<int64_t>>& from) {
    if (into.size() < from.size()) into.resize(from.size());
    for (size_t i = 0; i < from.size(); ++i) {
      if (into[i].size() < from[i].size()) into[i].resize(from[i].size(), 0);
      for (size_t j = 0; j < from[i].size(); ++j) into[i][j] += from[i][j];
    }
  };
  add(traffic.pair_bytes, stretch.traffic.pair_bytes);
  add(traffic.pair_messages, stretch.traffic.pair_messages);
  for (const auto& [tag, bytes] : stretch.traffic.collective_bytes) {
    std::vector<int64_t>& into = traffic.collective_bytes[tag];
    if (into.size() < bytes.size()) into.resize(bytes.size(), 0);
    for (size_t w = 0; w < bytes.size(); ++w) into[w] += bytes[w];
  }
}

// Runs iterations [start, iterations) as plans of at most checkpoint_every
// iterations each, every one starting from the state the last left (or the
// checkpoint's); r.exec gathers their losses and iteration ends (on one
// clock), each worker's memory peak over all of them and their traffic
// summed, and keeps the last one's timings, weights and statistics.
void train_in_stretches(TrainingResult& r, const StrategyInfo& strategy, const Cluster& cluster,
                        const StrategyConfig& config, const TrainingOptions& options, const Network& network,
                        const Weights& initial, const BatchSource& batches, ExecOptions exec, int32_t iterations) {
  const Checkpoint* resume = options.resume;
  const int32_t start = resume != nullptr ? resume->next_iteration : 0;
  if (resume != nullptr && (start < 0 || static_cast<size_t>(start) != resume->losses.size())) {
    throw InputError("--resume", "the checkpoint's losses do not end at its next iteration", "a whole checkpoint");
  }
  if (start >= iterations) {
    throw InputError("--iterations", "is " + std::to_string(iterations) + ", which the checkpoint has reached",
                     "more than the checkpoint's " + std::to_string(start) + " iterations");
  }
  Checkpoint carried;
  if (resume != nullptr) carried = *resume;
  exec.keep_state = options.checkpoint_every > 0;
  std::vector<double> ends;
  std::vector<Device::MemoryUse> memory;
  TrafficStats traffic;
  double clock = 0;
  for (int32_t first = start; first < iterations;) {
    const int32_t every = options.checkpoint_every;
    const int32_t end = every > 0 ? static_cast<int32_t>(std::min<int64_t>(iterations, (first / every + 1) * int64_t{every}))
                                  : iterations;
    r.plan = generate_plan(strategy, r.profile, cluster, config, end - first);
    exec.resume = first > start || resume != nullptr ? &carried.state : nullptr;
    const BatchSource shifted = [&, first](int32_t iteration, int64_t rows, RowRange range, Tensor* x,
                                           std::vector<int32_t>* y) { batches(iteration + first, rows, range, x, y); };
    ExecResult stretch = execute_plan(r.plan, network, initial, shifted, exec);
    for (double e : stretch.iteration_end_s) ends.push_back(clock + e);
    clock = ends.empty() ? clock : ends.back();
    carried.losses.insert(carried.losses.end(), stretch.loss_per_iteration.begin(), stretch.loss_per_iteration.end());
    add_stretch(stretch, memory, traffic);
    carried.next_iteration = end;
    if (exec.keep_state) {
      carried.state = std::move(stretch.state);
      if (options.on_checkpoint) options.on_checkpoint(carried);
    }
    r.exec = std::move(stretch);
    first = end;
  }
  r.exec.iteration_end_s = std::move(ends);
  r.exec.loss_per_iteration = std::move(carried.losses);
  r.exec.memory = std::move(memory);
  r.exec.traffic = std::move(traffic);
}

}  // namespace

TrainingResult train(const Model& model, const Dataset& data, const Cluster& cluster, StrategyConfig config,
                     const TrainingOptions& options, const Profile* profile) {
  const Network network = build_network(model);
  if (data.sample_shape != model.input_shape) {
    throw InputError("--dataset", data.name + " samples do not fit " + model.name + "'s input",
                     "a dataset whose samples match the model's input shape");
  }
  TrainingResult r;
  const int64_t batch = options.batch_size > 0 ? options.batch_size : model.default_batch;
  r.profile = profile != nullptr ? *profile : analytic_profile(model, batch, cluster);
  TRAINSIM_CHECK(r.profile.batch_size == batch, "the profile's batch is not the run's");
  const StrategyInfo& strategy = find_strategy(options.strategy, "--strategy");

  // The plan's global batch sets the iterations per epoch.
  const Plan probe = generate_plan(strategy, r.profile, cluster, config, 1);
  const auto global_batch = static_cast<int64_t>(std::llround(probe.samples_per_iteration));
  BatchSampler sampler(data.train_x.rows(), global_batch, options.seed);
  r.iterations_per_epoch = static_cast<int32_t>(sampler.batches_per_epoch());
  const int32_t iterations = options.iterations > 0 ? options.iterations : options.epochs * r.iterations_per_epoch;
  if (iterations < 1) throw InputError("--iterations", "is below 1", "at least one mini-batch");
  r.plan = generate_plan(strategy, r.profile, cluster, config, iterations);

  // Each worker draws its own rows' indices under the lock and copies the
  // samples outside it.
  std::mutex sampler_mu;
  const BatchSource batches = [&](int32_t iteration, int64_t rows, RowRange range, Tensor* x,
                                  std::vector<int32_t>* y) {
    TRAINSIM_CHECK(rows == global_batch, "the plan's global batch changed");
    std::vector<int64_t> picked;
    {
      std::lock_guard lock(sampler_mu);
      const std::span<const int64_t> all = sampler.batch_at(iteration);
      TRAINSIM_CHECK(range.first >= 0 && range.first + range.count <= static_cast<int64_t>(all.size()),
                     "rows beyond the global batch");
      picked.assign(all.begin() + range.first, all.begin() + range.first + range.count);
      if (range.first == 0 && x != nullptr && options.on_iteration) options.on_iteration(iteration, iterations);
    }
    std::vector<int32_t> labels;
    if (x != nullptr) gather_batch(data.train_x, data.train_y, picked, *x, labels);
    if (y != nullptr) {
      y->clear();
      const int64_t per = data.labels_per_sample;
      for (int64_t i : picked) y->insert(y->end(), data.train_y.begin() + i * per, data.train_y.begin() + (i + 1) * per);
    }
  };
  if (options.on_stale_gradients) {
    const int64_t staleness = predict_strategy(strategy, r.profile, cluster, config).staleness;
    if (staleness > 0) options.on_stale_gradients(check_stale_momentum(options.sgd.momentum, staleness));
  }
  ExecOptions exec;
  exec.sgd = options.sgd;
  exec.batch_size = batch;
  exec.stop_on_divergence = options.stop_on_divergence;
  exec.make_transport = options.make_transport;
  exec.local_endpoints = options.local_endpoints;
  exec.make_device = options.make_device;
  exec.time_device_work = options.time_device_work;
  const Weights initial = init_weights(network, options.seed);
  if (options.checkpoint_every > 0 || options.resume != nullptr) {
    train_in_stretches(r, strategy, cluster, config, options, network, initial, batches, exec, iterations);
  } else {
    r.exec = execute_plan(r.plan, network, initial, batches, exec);
  }

  r.iteration = iteration_stats(r.exec.iteration_end_s, r.plan.iteration_period,
                                static_cast<int32_t>(std::min<int64_t>(r.plan.drain_iterations, INT32_MAX)));
  r.samples_per_s = r.iteration.median_s > 0 ? r.plan.samples_per_iteration / r.iteration.median_s : 0;
  for (int32_t first = 0; first < iterations; first += r.iterations_per_epoch) {
    const int32_t end = std::min(iterations, first + r.iterations_per_epoch);
    double sum = 0;
    for (int32_t i = first; i < end; ++i) sum += r.exec.loss_per_iteration[static_cast<size_t>(i)];
    r.train_loss.push_back(sum / (end - first));
  }
  r.test_accuracy = options.evaluate && r.exec.complete
                        ? test_accuracy(network, r.exec.weights, r.exec.statistics, data)
                        : std::numeric_limits<double>::quiet_NaN();
  return r;
}

nlohmann::json training_to_json(const TrainingResult& r, const std::string& model, const std::string& devices,
                                const std::string& trace_path, uint64_t seed) {
  nlohmann::json j = {{"format", "trainsim.run/1"},
                      {"model", model},
                      {"strategy", r.plan.strategy},
                      {"config", r.plan.config},
                      {"devices", devices},
                      {"batch_size", r.profile.batch_size},
                      {"samples_per_iteration", r.plan.samples_per_iteration},
                      {"iterations", r.exec.loss_per_iteration.size()},
                      {"iterations_per_epoch", r.iterations_per_epoch},
                      {"seed", seed},
                      {"iteration_s", r.iteration.median_s},
                      {"iteration_min_s", r.iteration.min_s},
                      {"iteration_max_s", r.iteration.max_s},
                      {"warmup_iterations", r.iteration.warmup},
                      {"samples_per_s", r.samples_per_s},
                      {"loss_per_iteration", r.exec.loss_per_iteration},
                      {"train_loss", r.train_loss},
                      {"test_accuracy", r.test_accuracy}};
  if (!trace_path.empty()) j["trace"] = trace_path;
  const auto known = [](int64_t bytes) { return bytes >= 0 ? nlohmann::json(bytes) : nlohmann::json(nullptr); };
  if (std::any_of(r.exec.memory.begin(), r.exec.memory.end(),
                  [](const Device::MemoryUse& m) { return m.peak_bytes >= 0; })) {
    nlohmann::json& memory = j["device_memory"] = nlohmann::json::array();
    for (const Device::MemoryUse& m : r.exec.memory) {
      memory.push_back({{"peak_bytes", known(m.peak_bytes)}, {"limit_bytes", known(m.limit_bytes)}});
    }
  }
  return j;
}

}  // namespace trainsim
