// Iteration statistics and the per-worker breakdown of a simulated run (wall
// time split as seed 000 §4.3 splits it: compute, exposed communication, idle
// waiting on transfers, idle from imbalance), and the run as a Prediction.
#include "sim/des/summary.hpp"

#include <algorithm>
#include <string>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr double kSPerNs = 1e-9;
// How far back a gap is traced through chains of communication ops before
// the rest is called imbalance; deeper chains do not occur in the strategies.
constexpr int kMaxTraceDepth = 256;

// The Send a Recv depends on (validate_plan guarantees one), else -1.
OpId send_of_recv(const Plan& plan, OpId recv_id) {
  const Op& recv = plan.ops[recv_id];
  for (OpId dep : recv.deps) {
    const Op& send = plan.ops[dep];
    if (send.kind == OpKind::kSend && send.worker == recv.peer && send.peer == recv.worker) return dep;
  }
  return -1;
}

// One worker's wall time over the window, by cause, in nanoseconds (integers,
// so the four parts add up to the window exactly).
struct Tally {
  SimTime compute_ns = 0;
  SimTime exposed_comm_ns = 0;
  SimTime idle_transfer_ns = 0;
  SimTime idle_imbalance_ns = 0;
};

// Splits each idle gap of a worker's compute stream by what the op after it
// waited for last (its latest-ending dep or stream predecessor, the one whose
// end released it):
// - a Recv: until its Send started the peer was not ready (imbalance), then
//   the bytes were moving (idle_transfer);
// - communication (send, copy, host accumulate, collective, barrier): while it
//   ran the gap is exposed communication; a collective's wait between its own
//   member becoming ready and the last member becoming ready is imbalance;
//   the part of the gap before that is traced back the same way through what
//   that op waited for (so a queue of AllReduces is all exposed communication);
// - a compute op (of another worker), or nothing: imbalance.
// The trailing gap after the worker's last compute op is imbalance.
class GapAttribution {
 public:
  GapAttribution(const Plan& plan, const SimResult& result, const RunRecord& record, SimTime window_start_ns,
                 SimTime window_end_ns)
      : plan_(plan),
        timings_(result.timings),
        record_(record),
        window_start_ns_(window_start_ns),
        window_end_ns_(window_end_ns) {}

  Tally tally_worker(int32_t w) const {
    Tally t;
    SimTime previous_end_ns = 0;
    for (OpId id : plan_.streams[w][static_cast<int>(StreamKind::kCompute)]) {
      if (!is_compute(record_.kinds[id])) continue;  // a barrier or transfer here is waited on, not busy
      const OpTiming& timing = timings_[id];
      attribute_gap(previous_end_ns, timing.start_ns, record_.released_by[id], t);
      // From its start, or the op before it's end where it started under it
      // (a GPU worker's host queues the next op while the last one's work runs).
      add(t.compute_ns, std::max(timing.start_ns, previous_end_ns), timing.end_ns);
      previous_end_ns = std::max(previous_end_ns, timing.end_ns);
    }
    add(t.idle_imbalance_ns, previous_end_ns, window_end_ns_);
    return t;
  }

 private:
  // Adds the part of [from, to) inside the window.
  void add(SimTime& bucket, SimTime from, SimTime to) const {
    from = std::max(from, window_start_ns_);
    to = std::min(to, window_end_ns_);
    if (to > from) bucket += to - from;
  }

  void attribute_gap(SimTime from, SimTime to, OpId waited, Tally& t) const {
    // Split points are absolute times, so clipping to the window first changes nothing but the work.
    from = std::max(from, window_start_ns_);
    to = std::min(to, window_end_ns_);
    for (int depth = 0; to > from; ++depth) {
      if (waited < 0 || depth == kMaxTraceDepth || is_compute(record_.kinds[waited])) break;
      const OpKind kind = record_.kinds[waited];
      if (kind == OpKind::kRecv) {
        const OpId send = send_of_recv(plan_, waited);
        const SimTime sent_ns = std::clamp(send >= 0 ? timings_[send].start_ns : timings_[waited].start_ns, from, to);
        add(t.idle_imbalance_ns, from, sent_ns);
        add(t.idle_transfer_ns, sent_ns, to);
        return;
      }
      const SimTime started_ns = std::clamp(timings_[waited].start_ns, from, to);
      add(t.exposed_comm_ns, started_ns, to);
      to = started_ns;
      if (is_collective(kind)) {
        const SimTime ready_ns = std::clamp(record_.collective_ready_ns[waited], from, to);
        add(t.idle_imbalance_ns, ready_ns, to);
        to = ready_ns;
      }
      waited = record_.released_by[waited];
    }
    add(t.idle_imbalance_ns, from, to);
  }

  const Plan& plan_;
  const std::vector<OpTiming>& timings_;
  const RunRecord& record_;
  const SimTime window_start_ns_;
  const SimTime window_end_ns_;
};

Breakdown to_breakdown(const Tally& t, double scale) {
  Breakdown b;
  b.compute_s = static_cast<double>(t.compute_ns) * kSPerNs * scale;
  b.exposed_comm_s = static_cast<double>(t.exposed_comm_ns) * kSPerNs * scale;
  b.idle_transfer_s = static_cast<double>(t.idle_transfer_ns) * kSPerNs * scale;
  b.idle_imbalance_s = static_cast<double>(t.idle_imbalance_ns) * kSPerNs * scale;
  return b;
}

// Each iteration's end (an iteration without ops ends with the one before),
// then the median, min and max interval after warm-up; returns the window.
std::pair<SimTime, SimTime> summarize_iterations(const Plan& plan, const RunRecord& record, SimResult& r) {
  const int32_t n = plan.iterations;
  SimTime makespan_ns = 0;
  std::vector<SimTime> end_ns(std::max(n, 0), -1);
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const SimTime op_end_ns = r.timings[id].end_ns;
    makespan_ns = std::max(makespan_ns, op_end_ns);
    if (n > 0) end_ns[record.iterations[id]] = std::max(end_ns[record.iterations[id]], op_end_ns);
  }
  r.makespan_s = static_cast<double>(makespan_ns) * kSPerNs;
  if (n == 0) return {0, makespan_ns};
  for (int32_t i = 0; i < n; ++i) {
    if (end_ns[i] < 0) end_ns[i] = i > 0 ? end_ns[i - 1] : 0;
    r.iteration_end_s.push_back(static_cast<double>(end_ns[i]) * kSPerNs);
  }
  const SteadyState steady =
      steady_state(r.iteration_end_s, r.warmup_iterations, plan.iteration_period,
                   static_cast<int32_t>(std::min<int64_t>(plan.drain_iterations, n)));
  r.warmup_iterations = steady.warmup;
  r.iteration_s = steady.iteration_s;
  r.iteration_min_s = steady.min_s;
  r.iteration_max_s = steady.max_s;
  auto end_before = [&](int32_t i) { return i >= 0 ? end_ns[i] : SimTime{0}; };
  const SimTime window_start_ns = end_before(steady.window_first);
  return {window_start_ns, std::max(window_start_ns, end_before(steady.window_last))};
}

}  // namespace

SteadyState steady_state(const std::vector<double>& end_s, int32_t warmup, int32_t period, int32_t drain) {
  SteadyState s;
  // The iterations that end in the plan's drain are not there at all (one is always kept).
  const auto n = static_cast<int32_t>(end_s.size()) - std::clamp(drain, 0, std::max(0, static_cast<int32_t>(end_s.size()) - 1));
  if (n == 0) return s;
  // Leave out the warm-up and, as many again, the drain at the end (a
  // pipeline's last iterations end faster as it empties), then take intervals
  // over whole periods (a replicated input stage ends its iterations in
  // groups), per iteration. Too few iterations for a whole period after the
  // warm-up: keep the drain, and with periods longer than one iteration also
  // the warm-up, measuring whole periods from the start (single iterations of
  // a period can end at the same instant, which would read as zero-length
  // iterations).
  period = std::max(1, period);
  warmup = std::clamp(warmup, 0, n - 1);
  int32_t last = n - 1 - (n - warmup > 2 * std::max(1, warmup) ? warmup : 0);
  if ((last - (warmup - 1)) / period < 1) {
    last = n - 1;
    if (period > 1) {
      warmup = 0;
      period = std::min(period, n);
      last = n - 1 - (n % period);
    }
    if ((last - (warmup - 1)) / period < 1) period = 1;
  }
  // The interval ending at iteration i covers end[i - period] to end[i], with end[-1] = 0.
  auto end_before = [&](int32_t i) { return i >= 0 ? end_s[static_cast<size_t>(i)] : 0.0; };
  std::vector<double> intervals_s;
  for (int32_t i = warmup - 1 + period; i <= last; i += period) {
    intervals_s.push_back((end_before(i) - end_before(i - period)) / period);
  }
  s.warmup = warmup;
  s.window_first = warmup - 1;
  s.window_last = warmup - 1 + period * static_cast<int32_t>(intervals_s.size());
  s.min_s = *std::min_element(intervals_s.begin(), intervals_s.end());
  s.max_s = *std::max_element(intervals_s.begin(), intervals_s.end());
  std::sort(intervals_s.begin(), intervals_s.end());
  const size_t m = intervals_s.size();
  s.iteration_s = m % 2 == 1 ? intervals_s[m / 2] : 0.5 * (intervals_s[m / 2 - 1] + intervals_s[m / 2]);
  return s;
}

int32_t resolve_warmup_iterations(int32_t requested, int32_t iterations) {
  if (requested < 0) return iterations >= 3 ? std::max(1, iterations / 5) : 0;
  if (iterations > 0 && requested >= iterations) {
    throw InputError("warm-up iterations", "is " + std::to_string(requested) + " of " + std::to_string(iterations),
                     "fewer than the iterations simulated, so at least one is measured");
  }
  return requested;
}

void summarize_simulation(const Plan& plan, const RunRecord& record, SimResult& result) {
  const auto [window_start_ns, window_end_ns] = summarize_iterations(plan, record, result);
  result.window_s = static_cast<double>(window_end_ns - window_start_ns) * kSPerNs;
  const GapAttribution attribution(plan, result, record, window_start_ns, window_end_ns);
  // Scaled from the window to one iteration, so the average sums to iteration_s.
  const double scale = result.window_s > 0 ? result.iteration_s / result.window_s : 0.0;
  const auto workers = static_cast<int32_t>(plan.workers.size());
  // Summed over workers in seconds: workers × window can pass the clock's range.
  Breakdown total;
  for (int32_t w = 0; w < workers; ++w) {
    const Breakdown b = to_breakdown(attribution.tally_worker(w), 1.0);
    result.workers[w].breakdown = b;
    total.compute_s += b.compute_s;
    total.exposed_comm_s += b.exposed_comm_s;
    total.idle_transfer_s += b.idle_transfer_s;
    total.idle_imbalance_s += b.idle_imbalance_s;
  }
  if (workers > 0) {
    const double per_worker = scale / workers;
    result.breakdown = {total.compute_s * per_worker, total.exposed_comm_s * per_worker,
                        total.idle_transfer_s * per_worker, total.idle_imbalance_s * per_worker};
  }
}

Prediction prediction_from_simulation(const Plan& plan, const SimResult& result) {
  Prediction p;
  p.strategy = plan.strategy;
  p.method = "simulated";
  p.config = plan.config;
  p.workers = static_cast<int64_t>(plan.workers.size());
  p.iteration_s = result.iteration_s;
  p.samples_per_iteration = plan.samples_per_iteration;
  p.samples_per_s = result.iteration_s > 0 ? plan.samples_per_iteration / result.iteration_s : 0.0;
  p.breakdown = result.breakdown;
  for (size_t w = 0; w < plan.workers.size(); ++w) {
    DeviceMemory m;
    // The plan holds weights, gradients, optimizer state and stashes as one static amount.
    m.weights_bytes = plan.workers[w].static_bytes;
    m.activations_bytes = result.workers[w].peak_memory_bytes - plan.workers[w].static_bytes;
    p.memory.push_back(m);
  }
  return p;
}

}  // namespace trainsim
