// Inside sim/des: what the event loop hands to the summary. The engine times
// the ops; summary.cpp turns those timings into iteration statistics and the
// per-worker breakdown of wall time (compute, exposed communication, idle on
// transfers, idle from imbalance).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/des/engine.hpp"

namespace trainsim {

// The warm-up iterations of a run of `iterations`: `requested` when >= 0
// (it must leave one iteration measured), else max(1, iterations / 5) when
// iterations >= 3, else 0. Throws InputError for a bad request.
int32_t resolve_warmup_iterations(int32_t requested, int32_t iterations);

// What the event loop knows of each op beyond its timing, indexed by op id.
struct RunRecord {
  // When a collective op's deps and stream predecessor had all ended (any
  // other op starts then); written for collectives only, so left
  // uninitialized, and allocated only when the plan has collectives.
  std::unique_ptr<SimTime[]> collective_ready_ns;
  std::vector<OpId> released_by;  // the one of those whose end made it ready (the latest to end), -1 if none
  // Compact copies of what the summary reads of every op, so it walks small arrays, not the plan.
  std::vector<OpKind> kinds;
  std::vector<int32_t> iterations;
};

// Fills result's iteration_end_s, iteration_s (min, max), window_s,
// makespan_s, each worker's breakdown and the averaged breakdown, from
// result.timings (set), result.warmup_iterations (resolved) and `record`.
void summarize_simulation(const Plan& plan, const RunRecord& record, SimResult& result);

}  // namespace trainsim
