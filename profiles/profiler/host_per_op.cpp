// A GPU worker's host time per compute op, through the executor: the
// single plan run on the worker's device and its ops' host times fitted by
// kind and layer count.
#include "profiles/profiler/host_per_op.hpp"

#include <algorithm>
#include <barrier>
#include <map>
#include <string>

#include "exec/data/batching.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/training.hpp"
#include "model/error.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/profiler/measured_layers.hpp"
#include "profiles/profiler/timing.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

// The line through (layers, seconds) by least squares, neither part below 0.
DeviceSpec::HostTime fit_line(const std::map<int64_t, std::vector<double>>& by_layers) {
  if (by_layers.empty()) return {};
  std::vector<std::pair<double, double>> points;  // (layers, median seconds)
  for (const auto& [layers, seconds] : by_layers) points.emplace_back(static_cast<double>(layers), median_s(seconds));
  const auto count = static_cast<double>(points.size());
  double mean_n = 0;
  double mean_y = 0;
  for (const auto& [n, y] : points) {
    mean_n += n / count;
    mean_y += y / count;
  }
  double sxy = 0;
  double sxx = 0;
  for (const auto& [n, y] : points) {
    sxy += (n - mean_n) * (y - mean_y);
    sxx += (n - mean_n) * (n - mean_n);
  }
  if (sxx <= 0) return {0, mean_y / std::max(1.0, mean_n)};  // one layer count: its time spread over its layers
  if (sxy <= 0) return {mean_y, 0};                          // more layers no slower: flat
  const double slope = sxy / sxx;
  if (mean_y - slope * mean_n >= 0) return {mean_y - slope * mean_n, slope};
  double ny = 0;  // through 0
  double nn = 0;
  for (const auto& [n, y] : points) {
    ny += n * y;
    nn += n * n;
  }
  return {0, ny / nn};
}

}  // namespace

DeviceSpec::HostPerOp fit_host_per_op(const Plan& plan, const std::vector<std::vector<ExecOpTiming>>& runs,
                                      int32_t from_iteration) {
  std::map<int64_t, std::vector<double>> by_layers[3];  // HostKind's order: forward, backward, update
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    const HostKind kind = host_kind(op.kind);
    if (op.iteration < from_iteration || kind == HostKind::kNone) continue;
    for (const std::vector<ExecOpTiming>& timings : runs) {
      TRAINSIM_CHECK(timings.size() == plan.ops.size(), "a timing per op of the plan");
      by_layers[static_cast<int>(kind)][layers_spanned(op)].push_back(
          std::max(0.0, timings[id].end_s - timings[id].start_s));
    }
  }
  return {fit_line(by_layers[0]), fit_line(by_layers[1]), fit_line(by_layers[2])};
}

DeviceSpec::HostPerOp measure_host_per_op(const Model& model, int64_t batch, int64_t workers,
                                          const std::function<std::unique_ptr<Device>(int32_t)>& make_device,
                                          const MeasureOptions& options) {
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  if (workers < 1) throw InputError("--device", std::to_string(workers) + " workers", "at least 1 worker");
  if (options.repeats < 1) throw InputError("--repeats", std::to_string(options.repeats), "at least 1 timed run");
  const Network network = build_network(model);
  const Profile layers = analytic_profile(model, batch, nominal_cpu_cluster(1));  // the plan's ops: by structure
  const auto iterations = static_cast<int32_t>(std::max<int64_t>(0, options.warmups) + options.repeats);
  const Plan plan =
      generate_plan(find_strategy("single", "host per op"), layers, nominal_cpu_cluster(1), {}, iterations);
  const Tensor x = measured_batch(model, batch, options);
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  const int64_t per_sample = out.empty() ? 1 : element_count(out) / std::max<int64_t>(1, out.back());
  const std::vector<int32_t> labels(static_cast<size_t>(batch * per_sample), 0);
  const BatchSource batches = [&](int32_t, int64_t, RowRange range, Tensor* bx, std::vector<int32_t>* by) {
    std::vector<int64_t> rows(static_cast<size_t>(range.count));
    for (int64_t i = 0; i < range.count; ++i) rows[static_cast<size_t>(i)] = (range.first + i) % batch;
    Tensor gathered;
    std::vector<int32_t> gathered_labels;
    gather_batch(x, labels, rows, gathered, gathered_labels);
    if (bx != nullptr) *bx = std::move(gathered);
    if (by != nullptr) *by = std::move(gathered_labels);
  };
  ExecOptions exec;
  exec.sgd = {0.05, 0.9, 0.0};
  exec.batch_size = batch;
  exec.make_device = make_device;
  exec.time_device_work = true;
  exec.pin_workers = workers == 1;  // each run would pin its worker to the same core
  const Weights initial = init_weights(network, options.seed);
  std::vector<std::vector<ExecOpTiming>> runs(static_cast<size_t>(workers));
  run_threads(workers, [&](int64_t w, std::barrier<>& start) {
    start.arrive_and_wait();
    runs[static_cast<size_t>(w)] = execute_plan(plan, network, initial, batches, exec).timings;
  });
  return fit_host_per_op(plan, runs, static_cast<int32_t>(std::min<int64_t>(options.warmups, iterations - 1)));
}

}  // namespace trainsim
