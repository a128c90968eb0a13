// The plan interpreter's entry points; see interpreter.hpp. Its parts live in
// exec/interpreter/: the scheduler (threads per stream, dependencies,
// timings), the op handlers by kind, the weight versions, the workers' state.
#include "exec/interpreter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "exec/interpreter/handlers.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {

BatchSource whole_batches(WholeBatchSource source) {
  constexpr size_t kBatchesKept = 4;
  struct Cache {
    std::mutex mu;
    std::map<int32_t, std::pair<Tensor, std::vector<int32_t>>> batches;  // by iteration
  };
  auto cache = std::make_shared<Cache>();
  return [source = std::move(source), cache](int32_t iteration, int64_t global_rows, RowRange rows, Tensor* x,
                                             std::vector<int32_t>* y) {
    std::lock_guard lock(cache->mu);
    auto it = cache->batches.find(iteration);
    if (it == cache->batches.end()) {
      if (cache->batches.size() >= kBatchesKept) cache->batches.erase(cache->batches.begin());
      it = cache->batches.try_emplace(iteration).first;
      source(iteration, global_rows, it->second.first, it->second.second);
    }
    if (x != nullptr) *x = slice_rows(it->second.first, rows);
    if (y != nullptr) {
      const int64_t whole = it->second.first.rows();
      *y = slice_labels(it->second.second, rows, whole > 0 ? static_cast<int64_t>(it->second.second.size()) / whole : 1);
    }
  };
}

LossDiverged::LossDiverged(int32_t iteration_, double loss_)
    : std::runtime_error("the training loss diverged at iteration " + std::to_string(iteration_) + " (it is " +
                         (std::isnan(loss_) ? "NaN" : "infinite") + ")"),
      iteration(iteration_),
      loss(loss_) {}

ExecResult execute_plan(const Plan& plan, const Network& network, const Weights& initial, const BatchSource& batches,
                        const ExecOptions& options) {
  const auto endpoints = static_cast<int>(plan.workers.size());
  if (!options.local_endpoints.empty()) interp::Interpreter::check_shareable(plan);  // before the processes connect
  const bool sits_out = !options.local_endpoints.empty() &&
                        std::all_of(options.local_endpoints.begin(), options.local_endpoints.end(),
                                    [&](int32_t e) { return e >= endpoints; });
  if (sits_out) {
    if (options.make_transport) options.make_transport(endpoints);  // the joining is collective; none for this process
    ExecResult idle;
    idle.complete = false;
    idle.timings.resize(plan.ops.size());
    idle.iteration_end_s.assign(static_cast<size_t>(plan.iterations), 0.0);
    idle.loss_per_iteration.assign(static_cast<size_t>(plan.iterations), std::numeric_limits<double>::quiet_NaN());
    return idle;
  }
  std::unique_ptr<Transport> transport = options.make_transport
                                             ? options.make_transport(endpoints)
                                             : std::make_unique<InProcessTransport>(endpoints, options.recv_timeout_s);
  TRAINSIM_CHECK(transport != nullptr, "ExecOptions::make_transport returned no transport");
  interp::Interpreter interpreter(plan, network, initial, batches, options, std::move(transport));
  return interpreter.run();
}

nlohmann::json exec_chrome_trace(const Plan& plan, const ExecResult& result) {
  std::vector<OpTiming> timings;
  timings.reserve(result.timings.size());
  for (const ExecOpTiming& t : result.timings) {
    timings.push_back({static_cast<SimTime>(std::llround(t.start_s * 1e9)), static_cast<SimTime>(std::llround(t.end_s * 1e9))});
  }
  return chrome_trace(plan, timings);
}

}  // namespace trainsim
