// The interpreter's scheduler: each (worker, stream) of the plan is a thread
// running its ops in program order; an op starts once its deps have ended,
// as in the simulator, and its start and end are recorded. It knows no op
// kind: an OpHandler runs each op. A failure on any thread wakes every
// waiter and aborts the transport, so the run stops with that error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/transport/transport.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim::interp {

// Runs one op on the calling thread (the op's stream's).
class OpHandler {
 public:
  virtual ~OpHandler() = default;
  virtual void execute(OpId id, const Op& op) = 0;
};

class Scheduler {
 public:
  // `transport` is aborted when a thread fails; pin_workers as ExecOptions says.
  Scheduler(const Plan& plan, Transport& transport, bool pin_workers);

  // Runs every stream of the plan on a thread of its own, each op through
  // `handler`; returns when all have ended, rethrowing the first failure.
  void run(OpHandler& handler);

  // One per plan op, since run() started.
  const std::vector<ExecOpTiming>& timings() const { return timings_; }

 private:
  void run_op(OpHandler& handler, OpId id);
  void wait_for_deps(const Op& op);
  void release_waiters();
  double now_s() const;

  const Plan& plan_;
  Transport& transport_;
  bool pin_workers_;
  std::vector<std::atomic<bool>> done_;
  std::atomic<bool> failed_{false};
  std::vector<ExecOpTiming> timings_;
  std::vector<uint8_t> releases_own_stream_;  // per op: a compute op another stream of its worker waits on
  std::chrono::steady_clock::time_point start_;
};

}  // namespace trainsim::interp
