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
#include "model/clock.hpp"
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
  // `transport` is aborted when a thread fails; pin_workers as ExecOptions
  // says; `local`, per worker, whether this process runs it (empty: all).
  Scheduler(const Plan& plan, Transport& transport, bool pin_workers, std::vector<uint8_t> local = {});

  // Runs every stream of the local workers on a thread of its own, each op
  // through `handler`; returns when all have ended, rethrowing the first
  // failure. A dependency on another process's op is not waited for: the
  // message the op receives is its end.
  void run(OpHandler& handler);

  bool is_local(int32_t worker) const { return local_.empty() || local_[static_cast<size_t>(worker)] != 0; }

  // One per plan op, since run() started.
  const std::vector<ExecOpTiming>& timings() const { return timings_; }
  // When run() started, in seconds of the computer's monotonic clock
  // (monotonic_clock_s), which every process on it shares.
  double start_clock_s() const { return std::chrono::duration<double>(start_.time_since_epoch()).count(); }

 private:
  void run_op(OpHandler& handler, OpId id);
  void wait_for_deps(const Op& op);
  void release_waiters();
  double now_s() const;

  const Plan& plan_;
  Transport& transport_;
  bool pin_workers_;
  std::vector<uint8_t> local_;
  std::vector<std::atomic<bool>> done_;
  std::atomic<bool> failed_{false};
  std::vector<ExecOpTiming> timings_;
  std::vector<uint8_t> releases_own_stream_;  // per op: a compute op another stream of its worker waits on
  std::chrono::steady_clock::time_point start_;
};

// Each process times its ops from its own start, which follows the start
// barrier by however long the process then waits for a core: milliseconds
// apart where ranks outnumber cores. With every process's start on one
// clock (worker 0's), worker w's timings move by start_clock_s[w] -
// start_clock_s[0] (NaN for a worker whose start is unknown, whose timings
// keep the barrier's alignment), then every timing by the earliest start,
// which becomes time 0. Processes on one computer share its monotonic clock
// (Scheduler::start_clock_s); another computer's start comes onto worker
// 0's clock less its offset (clock_offset_s).
void align_timings(const Plan& plan, const std::vector<double>& start_clock_s, std::vector<ExecOpTiming>& timings);

// One exchange with another process: the local clock when the request
// left and when the reply came back, and the other's clock in its reply.
struct ClockSample {
  double sent_s = 0;
  double remote_s = 0;
  double received_s = 0;
};
// The other clock minus the local one (Cristian's algorithm): from the
// exchange with the shortest round trip, the reply's clock taken as read
// halfway through it. 0 for no samples.
double clock_offset_s(const std::vector<ClockSample>& samples);

}  // namespace trainsim::interp
