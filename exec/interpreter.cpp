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
  nlohmann::json trace = chrome_trace(plan, timings);
  // Each compute op's work where its device ran it, on a thread of its
  // worker after the plan's streams'.
  nlohmann::json& events = trace["traceEvents"];
  const size_t ops = events.size() - plan.ops.size();  // the metadata come first, then one event per op
  std::vector<uint8_t> named(plan.workers.size(), 0);
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const ExecOpTiming& t = result.timings[id];
    if (std::isnan(t.device_start_s) || std::isnan(t.device_end_s)) continue;
    const int32_t worker = plan.ops[id].worker;
    if (named[static_cast<size_t>(worker)] == 0) {
      named[static_cast<size_t>(worker)] = 1;
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", worker},
                        {"tid", kStreamKinds},
                        {"args", {{"name", "device (the compute ops' work)"}}}});
    }
    nlohmann::json e = events.at(ops + id);
    TRAINSIM_CHECK(e.at("ph") == "X", "the trace's events are not one per op after the metadata");
    e["tid"] = kStreamKinds;
    e["ts"] = t.device_start_s * 1e6;
    e["dur"] = std::max(0.0, t.device_end_s - t.device_start_s) * 1e6;
    events.push_back(std::move(e));
  }
  for (size_t id = 0; id < plan.ops.size(); ++id) {  // what each op's host time grows with on a GPU worker
    const int64_t calls = result.timings[id].library_calls;
    if (calls > 0) events.at(ops + id)["args"]["library_calls"] = calls;
  }
  return trace;
}

}  // namespace trainsim
