// Chrome trace event JSON of a simulated run (docs/formats.md "Trace"): one
// process per worker, one thread per stream it uses, one complete ("X") event
// per op, in microseconds. Opens in Perfetto and chrome://tracing; the
// executor writes the same shape.
#include <algorithm>
#include <string>
#include <vector>

#include "sim/des/engine.hpp"

namespace trainsim {
namespace {

constexpr double kUsPerNs = 1e-3;

// "forward s2 m5": the op kind, then its stage and micro-batch where it has them.
std::string event_name(const Op& op) {
  std::string name = op_kind_name(op.kind);
  if (op.stage >= 0) name += " s" + std::to_string(op.stage);
  if (op.microbatch >= 0) name += " m" + std::to_string(op.microbatch);
  return name;
}

nlohmann::json metadata(const char* what, int32_t pid, int32_t tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

nlohmann::json chrome_trace(const Plan& plan, const SimResult& result) { return chrome_trace(plan, result.timings); }

nlohmann::json chrome_trace(const Plan& plan, const std::vector<OpTiming>& timings) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t w = 0; w < plan.workers.size(); ++w) {
    const auto pid = static_cast<int32_t>(w);
    const std::string device = std::to_string(plan.workers[w].device);
    events.push_back(metadata("process_name", pid, 0, "worker " + std::to_string(w) + " (device " + device + ")"));
    for (int k = 0; k < kStreamKinds; ++k) {
      if (plan.streams[w][k].empty()) continue;
      events.push_back(metadata("thread_name", pid, k, stream_kind_name(static_cast<StreamKind>(k))));
    }
  }
  // An op drawn from the end of the one before it on its stream where it
  // started under it (a GPU worker's host queues the next op while the last
  // one's work runs: DeviceSpec::host_per_op), so a thread's slices nest;
  // args.started_us says when it started.
  std::vector<SimTime> shown_start_ns(plan.ops.size());
  for (const auto& worker : plan.streams) {
    for (const auto& stream : worker) {
      SimTime previous_end_ns = 0;
      for (const OpId id : stream) {
        shown_start_ns[id] = std::max(timings[id].start_ns, std::min(previous_end_ns, timings[id].end_ns));
        previous_end_ns = std::max(previous_end_ns, timings[id].end_ns);
      }
    }
  }
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    const OpTiming& t = timings[id];
    nlohmann::json args = {{"op", op_kind_name(op.kind)},
                           {"stage", op.stage},
                           {"microbatch", op.microbatch},
                           {"iteration", op.iteration},
                           {"bytes", op.bytes}};
    if (op.first_layer >= 0) args["layers"] = {op.first_layer, op.last_layer};
    if (shown_start_ns[id] != t.start_ns) args["started_us"] = static_cast<double>(t.start_ns) * kUsPerNs;
    events.push_back({{"name", event_name(op)},
                      {"ph", "X"},
                      {"pid", op.worker},
                      {"tid", static_cast<int>(op.stream)},
                      {"ts", static_cast<double>(shown_start_ns[id]) * kUsPerNs},
                      {"dur", static_cast<double>(t.end_ns - shown_start_ns[id]) * kUsPerNs},
                      {"args", std::move(args)}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace trainsim
