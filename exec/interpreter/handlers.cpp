// The interpreter's constructor (what it learns from the plan before the
// run), its dispatch of an op to its handler, and the run's result.
#include "exec/interpreter/handlers.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/weight_versions.hpp"
#include "exec/tensor/held_layers.hpp"
#include "model/error.hpp"

namespace trainsim::interp {

Interpreter::Interpreter(const Plan& plan, const Network& network, const Weights& initial,
                         const BatchSource& batches, const ExecOptions& options,
                         std::unique_ptr<Transport> transport)
    : plan_(plan), network_(network), batches_(batches), options_(options),
      spectrain_(std::any_of(plan.ops.begin(), plan.ops.end(),
                             [](const Op& op) { return op.weights == WeightPolicy::kPredicted; })),
      gathers_sparse_rows_(plan.gathers_sparse_rows),
      serves_dense_(std::any_of(plan.servers.begin(), plan.servers.end(),
                                [](const PlanServer& s) { return s.rule == ServerRule::kDense; })),
      owned_transport_(std::move(transport)), transport_(*owned_transport_), local_(local_mask(plan, options)),
      shared_(std::find(local_.begin(), local_.end(), 0) != local_.end()),
      scheduler_(plan, transport_, options.pin_workers, local_workers()) {
  TRAINSIM_CHECK(options.batch_size > 0, "the executor needs the plan's per-device batch size");
  TRAINSIM_CHECK(transport_.workers() == static_cast<int>(plan.workers.size()),
                 "the transport must join the plan's workers");
  TRAINSIM_CHECK(!(spectrain_ && serves_dense_), "plan: SpecTrain's predictions of weights that servers step");
  workers_.resize(plan.workers.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    auto& w = workers_[i];
    w = std::make_unique<WorkerState>();
    // A worker of another process computes there: its device is made
    // there (a GPU device here would take up that GPU in this process).
    w->device = options.make_device && local_[i] != 0 ? options.make_device(static_cast<int32_t>(i))
                                                      : std::make_unique<EigenCpuDevice>();
    TRAINSIM_CHECK(w->device != nullptr, "ExecOptions::make_device returned no device");
    w->weights = initial;
    w->statistics = init_statistics(network_);
    w->optimizer = std::make_unique<Sgd>(options.sgd);
    if (spectrain_) {
      w->spectrain = std::make_unique<SpecTrain>(SpecTrainOptions{options.sgd.learning_rate, options.spectrain_gamma});
    }
  }
  std::vector<std::vector<LayerRange>> ranges(plan.workers.size());  // each worker's passes'
  const auto layers = static_cast<int64_t>(network_.layers.size());
  for (const Op& op : plan.ops) {
    check_supported(op);
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward || op.kind == OpKind::kRecompute) {
      ranges[static_cast<size_t>(op.worker)].push_back(
          {op.first_layer >= 0 ? op.first_layer : 0, op.last_layer >= 0 ? op.last_layer : layers - 1});
    }
    if (op.kind == OpKind::kRecompute) {
      recomputed_.insert({op.worker, op.iteration, std::max(0, op.microbatch), op.first_layer});
    }
    count_reader(*workers_[op.worker], op, network_);
    if (op.kind == OpKind::kForward) microbatches_ = std::max(microbatches_, op.microbatch + 1);
    if (op.kind == OpKind::kUpdate) ++workers_[op.worker]->updates_left[op.iteration];
    if ((op.kind == OpKind::kBackward || op.kind == OpKind::kUpdate) && op.first_layer >= 0) {
      WorkerState& w = *workers_[op.worker];
      w.grad_first = w.grad_first < 0 ? op.first_layer : std::min(w.grad_first, op.first_layer);
      w.grad_last = std::max(w.grad_last, op.last_layer);
    }
  }
  // A device may hold its worker's layers alone (a GPU's networks).
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (local_[i] != 0) workers_[i]->device->hold_ranges(distinct_ranges(std::move(ranges[i]), layers));
  }
  count_gradient_sends_without_update();
  shards_ = std::max<int64_t>(1, std::llround(plan.samples_per_iteration / static_cast<double>(options.batch_size)));
  for (const LayerGrads& layer : zero_gradients(network_, initial)) {
    gradient_layout_.emplace_back();
    for (const ParamGrad& g : layer) gradient_layout_.back().push_back(g.sparse);
  }
  assign_collective_tags();
  link_host_ops();
  link_servers();
  make_servers(initial);
  if (options.resume != nullptr) resume_from(*options.resume);
  loss_sum_.assign(plan.workers.size(), std::vector<double>(static_cast<size_t>(plan.iterations), 0.0));
  loss_rows_.assign(plan.workers.size(), std::vector<int64_t>(static_cast<size_t>(plan.iterations), 0));
}

std::vector<int32_t> Interpreter::first_worker_per_layer(OpKind kind) const {
  std::vector<int32_t> worker(network_.layers.size(), -1);
  for (const Op& op : plan_.ops) {
    if (op.kind != kind) continue;
    for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
      if (worker[static_cast<size_t>(l)] < 0) worker[static_cast<size_t>(l)] = op.worker;
    }
  }
  return worker;
}

ExecResult Interpreter::run() {
  // What the transport passes boundaries device to device by, opened by
  // every process before the clocks start.
  transport_.open_kept_paths(kept_directions());
  if (shared_) start_together();
  scheduler_.run(*this);
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (local_[w]) count_losses(static_cast<int32_t>(w), std::numeric_limits<int32_t>::max());
  }
  ExecResult r = result();
  if (shared_) gather_results(r);
  if (options_.keep_state) {
    if (shared_) {
      share_state(r);
    } else {
      r.state = raw_state();
      complete_state(r.state);
    }
  }
  return r;
}

void Interpreter::check_supported(const Op& op) const {
  if (op.kind == OpKind::kAllReduce && op.codec != Codec::kNone && op.algorithm != CollectiveAlgorithm::kRing) {
    throw InputError("--set algorithm", "is " + std::string(collective_algorithm_name(op.algorithm)) +
                                            " with compression " + codec_name(op.codec),
                     "algorithm=ring (compressed gradients are reduced hop by hop around the ring)");
  }
  if (op.kind == OpKind::kAllReduce && op.algorithm == CollectiveAlgorithm::kLibrary) {
    if (!transport_.has_library_all_reduce()) {
      throw InputError("--set algorithm", "is mpi, the MPI library's own AllReduce",
                       "a run across MPI processes (trainsim run under mpirun, or --launcher mpi), or a GPU "
                       "each with NCCL (--devices cuda:G,H,...; trainsim devices says whether NCCL opens)");
    }
    if (plan_.groups.at(static_cast<size_t>(op.group)).size() != plan_.workers.size()) {
      throw InputError("--set algorithm", "is mpi for an AllReduce among some of the workers",
                       "algorithm=mpi where every worker takes part in the AllReduce");
    }
  }
  if (op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllGather) {
    throw InputError("--strategy", std::string("plans a ") + op_kind_name(op.kind) + " (a sharded job's plan)",
                     "a plan of the executor's strategies");
  }
  if (op.repeat > 1) {
    throw InputError("--strategy", "plans AllReduces standing for several (a transformer job's plan)",
                     "a plan of the executor's strategies");
  }
  if (op.gradients != GradientPart::kBoth) {
    throw InputError("--strategy",
                     "plans backwards that compute their input and weight gradients apart "
                     "(a zero-bubble schedule), which the executor does not run yet",
                     "a strategy whose backwards compute both; trainsim predict and simulate price this one");
  }
  TRAINSIM_CHECK(op.kind != OpKind::kSend || op.payload != Payload::kNone, "plan: a send without its payload");
}

void Interpreter::execute(OpId id, const Op& op) {
  // A compute op's work timed where its device runs it (ExecOptions::time_device_work).
  Device* timing =
      options_.time_device_work && op.stream == StreamKind::kCompute ? workers_[op.worker]->device.get() : nullptr;
  if (timing != nullptr) timing->time_work_of(id);
  switch (op.kind) {
    case OpKind::kForward: forward(id, op); break;
    case OpKind::kBackward: backward(id, op); break;
    case OpKind::kUpdate: update(id, op); break;
    case OpKind::kCompress: compress(op); break;
    case OpKind::kDecompress: break;  // the AllReduce's hops decode what they receive
    case OpKind::kSend: send(id, op); break;
    case OpKind::kRecv: recv(id, op); break;
    case OpKind::kAllReduce:
      if (host_source_[static_cast<size_t>(id)] >= 0) {
        host_all_reduce(id, op);
      } else {
        all_reduce(id, op);
      }
      break;
    case OpKind::kBroadcast: broadcast(id, op); break;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
      TRAINSIM_CHECK(false, "a sharded collective reached the executor");
      break;
    case OpKind::kBarrier: barrier(id, op); break;
    case OpKind::kCopyToHost: copy_to_host(id, op); break;
    case OpKind::kHostAccumulate: host_accumulate_op(id, op); break;
    case OpKind::kServerStep: server_step(op); break;
    case OpKind::kCopyToDevice: copy_to_device(id, op); break;
    case OpKind::kRecompute: recompute(id, op); break;
  }
  if (timing != nullptr) timing->time_work_of(-1);
  if (!handout_readers_.empty()) hand_out_pulls(id);
}

ExecResult Interpreter::result() {
  ExecResult r;
  r.timings = scheduler_.timings();
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!local_[i] || workers_[i]->device == nullptr) continue;
    for (const Device::WorkTime& t : workers_[i]->device->work_times()) {
      ExecOpTiming& timing = r.timings.at(static_cast<size_t>(t.op));
      timing.device_start_s = t.start_s - scheduler_.start_clock_s();
      timing.device_end_s = t.end_s - scheduler_.start_clock_s();
    }
  }
  summarize(r);
  // Each layer's weights from the first worker updating it; its statistics
  // from the first running its forward (DDP keeps rank 0's buffers).
  const std::vector<int32_t> updater = first_worker_per_layer(OpKind::kUpdate);
  const std::vector<int32_t> forwarder = first_worker_per_layer(OpKind::kForward);
  for (const std::unique_ptr<WorkerState>& w : workers_) {
    if (w->device != nullptr) weights_to_host(*w, /*everything=*/true);
  }
  r.weights = workers_.front()->weights;
  r.statistics = workers_.front()->statistics;
  for (size_t l = 0; l < network_.layers.size(); ++l) {
    if (updater[l] >= 0) r.weights[l] = workers_[static_cast<size_t>(updater[l])]->weights[l];
    if (forwarder[l] >= 0) r.statistics[l] = workers_[static_cast<size_t>(forwarder[l])]->statistics[l];
  }
  take_server_shares(r.weights);
  r.traffic = transport_.traffic();
  r.memory.resize(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (local_[i] && workers_[i]->device != nullptr) r.memory[i] = workers_[i]->device->memory_use();
  }
  return r;
}

// What each endpoint holds (this process's; the others' left empty).
RunState Interpreter::raw_state() const {
  RunState state;
  state.endpoints.resize(workers_.size() + served_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!local_[i]) continue;
    WorkerState& w = *workers_[i];
    weights_to_host(w, /*everything=*/true);
    state.endpoints[i] = EndpointState{w.weights, w.optimizer->velocity(),
                                       w.spectrain ? w.spectrain->smoothed_gradient() : Weights{}, w.statistics};
  }
  std::vector<EndpointState> servers = served_.empty() ? std::vector<EndpointState>{} : server_states();
  std::move(servers.begin(), servers.end(), state.endpoints.begin() + static_cast<std::ptrdiff_t>(workers_.size()));
  return state;
}

// A worker's copy of a layer it does not update itself (a parameter
// server's client, a stage's view of other stages) is whatever it last
// received, which the drained plan may have left a step behind: the state
// gives it the layer as its updater (a worker, or the server) holds it, as
// every worker held `initial` at the start. Needs every endpoint's state.
void Interpreter::complete_state(RunState& state) const {
  const size_t layers = network_.layers.size();
  std::vector<std::vector<uint8_t>> updates(workers_.size(), std::vector<uint8_t>(layers, 0));
  for (const Op& op : plan_.ops) {
    if (op.kind != OpKind::kUpdate) continue;
    for (int32_t l = std::max(0, op.first_layer); l <= op.last_layer; ++l) {
      updates[static_cast<size_t>(op.worker)][static_cast<size_t>(l)] = 1;
    }
  }
  const std::vector<int32_t> updater = first_worker_per_layer(OpKind::kUpdate);
  std::vector<const LayerParams*> latest(layers, nullptr);
  for (size_t l = 0; l < layers; ++l) {
    if (updater[l] >= 0) latest[l] = &state.endpoints[static_cast<size_t>(updater[l])].weights[l];
  }
  for (size_t k = 0; k < served_.size(); ++k) {  // a server's layers are its, whatever the workers step
    const ServedVariable& s = served_[k];
    for (int32_t l = s.first; l <= s.last; ++l) {
      latest[static_cast<size_t>(l)] = &state.endpoints[workers_.size() + k].weights[static_cast<size_t>(l)];
      for (auto& worker : updates) worker[static_cast<size_t>(l)] = 0;
    }
  }
  // Copies first: a worker's layer may be another's source.
  std::vector<std::vector<std::pair<size_t, LayerParams>>> taken(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    for (size_t l = 0; l < layers; ++l) {
      if (!updates[i][l] && latest[l] != nullptr) taken[i].emplace_back(l, *latest[l]);
    }
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    for (auto& [l, params] : taken[i]) state.endpoints[i].weights[l] = std::move(params);
  }
}

void Interpreter::resume_from(const RunState& state) {
  const auto shapes_of = [](const Weights& weights) {
    std::vector<std::vector<std::vector<int64_t>>> shapes;
    for (const LayerParams& layer : weights) {
      shapes.emplace_back();
      for (const Tensor& t : layer) shapes.back().push_back(t.shape);
    }
    return shapes;
  };
  if (state.endpoints.size() != workers_.size() + served_.size()) {
    throw InputError("--resume", "holds " + std::to_string(state.endpoints.size()) + " workers and servers",
                     "a checkpoint of this plan's " + std::to_string(workers_.size() + served_.size()));
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!local_[i]) continue;  // another process's
    WorkerState& w = *workers_[i];
    const EndpointState& e = state.endpoints[i];
    if (shapes_of(e.weights) != shapes_of(w.weights) || shapes_of(e.statistics) != shapes_of(w.statistics)) {
      throw InputError("--resume", "holds weights of another model", "a checkpoint of this model");
    }
    weights_to_host(w, /*everything=*/true);  // the device lets go of what it kept
    w.weights = e.weights;
    ++w.generation;
    w.statistics = e.statistics;
    w.optimizer->set_velocity(e.velocity);
    if (w.spectrain) w.spectrain->set_smoothed_gradient(e.smoothed);
  }
  resume_servers(std::span<const EndpointState>(state.endpoints).subspan(workers_.size()));
}

void Interpreter::summarize(ExecResult& r) const {
  r.iteration_end_s.assign(static_cast<size_t>(plan_.iterations), 0.0);
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    double& end = r.iteration_end_s[static_cast<size_t>(plan_.ops[id].iteration)];
    end = std::max(end, r.timings[id].end_s);
  }
  r.loss_per_iteration.clear();
  for (size_t i = 0; i < static_cast<size_t>(plan_.iterations); ++i) {
    double sum = 0.0;
    int64_t rows = 0;
    for (size_t w = 0; w < loss_sum_.size(); ++w) sum += loss_sum_[w][i], rows += loss_rows_[w][i];
    r.loss_per_iteration.push_back(rows > 0 ? sum / static_cast<double>(rows) : 0.0);
  }
}

}  // namespace trainsim::interp
