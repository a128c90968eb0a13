// The discrete-event simulator: gives every op of a plan a start and an end
// on a cluster. Streams run their ops in order; an op starts when its stream
// is free, its deps have ended and its resource is free. Time is an integer
// count of nanoseconds and events are ordered by (time, sequence), so runs
// repeat exactly; random slowdowns come from an explicit seed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "profiles/cluster.hpp"
#include "sim/cost/prediction.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

using SimTime = int64_t;  // nanoseconds since the start of the run (at most 2^63 - 1: about 292 years)

// The largest straggler slowdown: a millionfold slower op is already a
// stopped device, and larger factors only carry the clock out of its range.
inline constexpr double kMaxStragglerSlowdown = 1e6;

struct SimOptions {
  double straggler_probability = 0;  // each compute op of a worker is slowed with this probability
  double straggler_slowdown = 1;     // by this factor (1.5 = takes 50% longer), at most kMaxStragglerSlowdown
  double jitter = 0;                 // relative standard deviation of compute durations (0 = exact)
  uint64_t seed = 1;                 // every random draw comes from this
  int32_t warmup_iterations = -1;    // iterations left out of the steady state; -1 = automatic
};

struct OpTiming {
  SimTime start_ns = 0;
  SimTime end_ns = 0;
};

struct WorkerResult {
  Breakdown breakdown;           // over the measured window; sums to window_s
  double peak_memory_bytes = 0;  // static bytes plus the largest sum of live allocations
};

struct SimResult {
  std::vector<OpTiming> timings;       // one per plan op
  std::vector<double> iteration_end_s; // when each iteration's last op ended
  double iteration_s = 0;              // median interval between iteration ends after warm-up
  double iteration_min_s = 0;
  double iteration_max_s = 0;
  int32_t warmup_iterations = 0;       // as resolved
  double window_s = 0;                 // length of the measured window (after warm-up)
  double makespan_s = 0;               // end of the last op
  std::vector<WorkerResult> workers;   // per plan worker
  Breakdown breakdown;                 // average over workers, scaled to one iteration
  int64_t events = 0;                  // events processed
  uint64_t seed = 0;
};

// The steady state of a run whose iterations ended at `end_s` (seconds, one
// per iteration): the median, min and max interval per iteration after
// `warmup` iterations, leaving out as many at the end (the drain) and taking
// intervals over whole `period`s (plan.iteration_period); with too few
// iterations it keeps the drain (and the warm-up, for periods over one).
// The last `drain` iterations (plan.drain_iterations: they end in the plan's
// own drain, as pipesgd's pending updates do) are left out before all that.
// window_first/window_last: the iterations whose ends bound the measured
// window (-1 = the start). The simulator and the executor both use it.
struct SteadyState {
  double iteration_s = 0;
  double min_s = 0;
  double max_s = 0;
  int32_t warmup = 0;
  int32_t window_first = -1;
  int32_t window_last = -1;
};
SteadyState steady_state(const std::vector<double>& end_s, int32_t warmup, int32_t period, int32_t drain = 0);

// Runs `plan` on `cluster`. Links: a worker's device has one egress and one
// ingress port on the intra-machine link, each machine one egress and one
// ingress port on the inter-machine link, each device one port per direction
// to the host; a transfer uses every port on its path, and concurrent
// transfers share a port's bandwidth equally. Collectives start when every
// member is ready and last the α-β-γ time of their algorithm. Host
// accumulation shares the machine's host reduction throughput equally.
// Throws InputError when the run passes the clock's 2^63 ns (about 292 years).
SimResult simulate_plan(const Plan& plan, const Cluster& cluster, const SimOptions& options);

// Chrome trace (docs/formats.md "Trace"): one process per worker, one thread per
// stream, a complete ("X") event per op with args op, stage, microbatch,
// iteration, bytes; microseconds.
nlohmann::json chrome_trace(const Plan& plan, const SimResult& result);
// The same from any op timings (one per plan op): the executor's measured ones.
nlohmann::json chrome_trace(const Plan& plan, const std::vector<OpTiming>& timings);

// The simulated counterpart of a cost model's Prediction: iteration time,
// samples/s, breakdown, peak memory per worker (as DeviceMemory::activations
// beside the static bytes), method "simulated".
Prediction prediction_from_simulation(const Plan& plan, const SimResult& result);

}  // namespace trainsim
