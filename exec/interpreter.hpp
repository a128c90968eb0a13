// The plan interpreter: workers execute, for real, the very plan the
// simulator times. Each (worker, stream) of the plan is a thread running its
// ops in program order; an op starts once its deps have ended, as in the
// simulator. Activations, gradients and weights move through a Transport
// passed in (in-process by default; MPI and NCCL later), and every op's start
// and end are recorded in the simulator's trace shape. Its parts live in
// exec/interpreter/ (scheduler, op handlers by kind, weight versions).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "exec/data/batching.hpp"
#include "exec/optim/sgd.hpp"
#include "exec/run_state.hpp"
#include "exec/tensor/device.hpp"
#include "exec/tensor/layers.hpp"
#include "exec/transport/transport.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {

// Rows `rows` of the global batch of `iteration` (`global_rows` samples in
// all): their samples into *x ({rows.count, sample...}) and/or their labels
// into *y, each when not null. Each worker fetches only its own rows, as a
// distributed data loader does, so it is called concurrently from the
// workers' threads and must be thread-safe.
using BatchSource = std::function<void(int32_t iteration, int64_t global_rows, RowRange rows, Tensor* x,
                                       std::vector<int32_t>* y)>;

// A source that makes the whole global batch at once: `rows` samples and
// their labels. whole_batches() adapts it to a BatchSource, making each
// iteration's batch once under a lock and keeping the few latest (pipelines
// interleave iterations, Parallax looks one ahead).
using WholeBatchSource = std::function<void(int32_t iteration, int64_t rows, Tensor& x, std::vector<int32_t>& y)>;
BatchSource whole_batches(WholeBatchSource source);

struct ExecOptions {
  SgdOptions sgd{0.05, 0.0, 0.0};
  int64_t batch_size = 0;  // per-device batch the plan was generated for (the profile's)
  double recv_timeout_s = 0;  // > 0: a stuck receive aborts the run instead of hanging
  // Pins each worker's threads to cores as worker_thread_core says (where the
  // machine allows), so workers do not share a core while another idles.
  bool pin_workers = true;
  // SpecTrain's decay factor γ (seed 000 eq. 1) for dualpipe with spectrain;
  // its η is sgd.learning_rate.
  double spectrain_gamma = 0.9;
  // Called, when set, with each compute op and the weights it reads (after
  // SpecTrain's prediction), from the worker's thread: a window for tests.
  std::function<void(OpId, const Weights&)> on_weights_read;
  // Makes the transport the run moves data through, joining `endpoints`
  // workers: the plan's workers, then one per server of the plan. Unset: an
  // InProcessTransport (the workers are threads of this process) with
  // recv_timeout_s. Where an MPI or NCCL backend plugs in; the run aborts it
  // when a worker fails and reads its traffic() for ExecResult::traffic.
  std::function<std::unique_ptr<Transport>(int endpoints)> make_transport;
  // Makes the device worker `worker` computes on (its layer kernels, loss
  // and gradient buffers), called for this process's workers only (the
  // others': an EigenCpuDevice, never computed on). Unset: an
  // EigenCpuDevice. Where a CUDA backend plugs in.
  std::function<std::unique_ptr<Device>(int32_t worker)> make_device;
  // Stops the run at the first micro-batch whose loss is NaN or infinite
  // (throwing LossDiverged) instead of training on to the end on weights
  // that mean nothing.
  bool stop_on_divergence = false;
  // The plan's endpoints (its workers, then its servers) this process runs;
  // empty: all of them, each worker's streams threads of this process. In a
  // run shared by several processes (the MPI transport, one endpoint per
  // rank) each runs its own: a dependency on an op run elsewhere is met by
  // the message its recv or collective waits for, and a plan whose ops
  // share memory across endpoints otherwise (host accumulation over a
  // machine's workers, Parallax's servers) is refused (InputError). The
  // processes start together (a barrier) and the results are gathered to
  // the one running endpoint 0 (ExecResult::complete). A process whose
  // endpoints are all beyond the plan's (more processes than the plan has
  // endpoints) sits the run out: it calls make_transport, which joins the
  // others collectively and may give it none, and returns an incomplete
  // result without losses (NaN) or timings.
  std::vector<int32_t> local_endpoints;
  // Where the run starts from, when set: an earlier run's state (keep_state)
  // of the same plan's endpoints, instead of `initial` with fresh optimizers.
  const RunState* resume = nullptr;
  // Fills ExecResult::state at the end of the run, for a next one to resume.
  // Both refused (InputError) in a run shared by several processes.
  bool keep_state = false;
  // Times each compute op's work where its device runs it, for a device
  // that runs it after the op has queued it (a GPU's; Device::time_work_of):
  // ExecOpTiming::device_start_s, device_end_s.
  bool time_device_work = false;
};

// The run stopped at a loss that is NaN or infinite (stop_on_divergence).
struct LossDiverged : std::runtime_error {
  LossDiverged(int32_t iteration_, double loss_);
  int32_t iteration;  // of the micro-batch whose loss it was
  double loss;
};

struct ExecOpTiming {
  double start_s = 0;  // since the run started
  double end_s = 0;
  // A compute op's work where its device ran it (ExecOptions::
  // time_device_work: a GPU's kernels, timed by CUDA events), on the same
  // clock; NaN where the device does not time it (the CPU's, whose work is
  // the op's start to end).
  double device_start_s = std::numeric_limits<double>::quiet_NaN();
  double device_end_s = std::numeric_limits<double>::quiet_NaN();
  // Calls into the GPU libraries the op's thread made during it
  // (exec/library_calls.hpp; 0 where none, as on the CPU).
  int64_t library_calls = 0;
};

struct ExecResult {
  // False in a process of a shared run (ExecOptions::local_endpoints) other
  // than endpoint 0's: its result holds only its own ops' timings, its
  // workers' losses and layers, and the traffic it sent.
  bool complete = true;
  std::vector<ExecOpTiming> timings;        // one per plan op
  std::vector<double> iteration_end_s;      // when each iteration's last op ended
  std::vector<double> loss_per_iteration;   // mean loss over the iteration's samples
  Weights weights;                          // after the run: each layer from the first worker holding it
  Statistics statistics;                    // after the run: each layer's from the first worker running its forward
  TrafficStats traffic;                     // bytes moved between workers
  // Per worker, the most memory its device held and its limit
  // (Device::memory_use; -1 where it does not count them or, in a shared
  // run, where another process ran the worker).
  std::vector<Device::MemoryUse> memory;
  RunState state;                           // with ExecOptions::keep_state: every endpoint's, after the run
};

// Runs `plan` with `network` from `initial` weights on batches from `batches`.
// Every op kind runs: a recompute rebuilds, from the input its forward kept,
// the caches its backward uses (DSP); an op whose weight policy is predicted
// (dualpipe with spectrain) reads SpecTrain's weights `weight_ahead` versions
// ahead; an AllReduce with a codec (pipesgd's compression) applies it at
// every hop. It reads what the ops and the plan's servers carry, never
// plan.strategy or plan.config. InputError
// naming the setting if a plan needs what the executor does not do. A failure
// in any worker stops all of them and is rethrown.
// Pins the calling thread to `core` (mod the cores this process may use);
// false where the machine does not allow it.
bool pin_current_thread(int core);

// The cores this process may run on (its affinity mask; at least 1).
int64_t usable_cores();

// Whether a worker's communication threads share its compute thread's core:
// yes unless every worker has a spare core (cores >= 2·workers). Beside the
// compute thread, a thread woken by it starts at once on a core whose data
// it shares; on another core a wake-up took 20-60 µs here, and the gradients
// it packs crossed between the cores' caches.
bool communication_shares_compute_core(int64_t workers, int64_t cores);

// The core worker `worker` of `workers` runs a thread on: its compute thread
// on core `worker`, its other threads on the same core or, when they do not
// share it, on the spare core `workers + worker` (pin_current_thread takes it
// mod the usable cores).
int worker_thread_core(int32_t worker, int64_t workers, int64_t cores, bool compute);

// The cores worker_thread_core gives each worker's threads: 1 where they
// share their compute thread's, else 2.
int64_t cores_per_worker(int64_t workers, int64_t cores);

ExecResult execute_plan(const Plan& plan, const Network& network, const Weights& initial, const BatchSource& batches,
                        const ExecOptions& options);

// Chrome trace of a run, the shape sim/des/engine.hpp's chrome_trace writes.
nlohmann::json exec_chrome_trace(const Plan& plan, const ExecResult& result);

}  // namespace trainsim
