// The pipeline plan writer and PipeDream's 1F1B order; see pipeline_plan.hpp.
#include "sim/plan/pipeline_plan.hpp"

#include <algorithm>
#include <numeric>

#include "model/error.hpp"
#include "sim/cost/common.hpp"

namespace trainsim {

namespace {

// The strategy's name, once the plan's size is known to be within kMaxPlanOps.
std::string checked_plan_size(std::string strategy, const Pipeline& pipeline, int32_t iterations,
                              int64_t microbatches) {
  const double stages = static_cast<double>(pipeline.stages.size());
  // A lower bound: updates, AllReduces and barriers come on top.
  const double per_iteration = static_cast<double>(std::max<int64_t>(1, microbatches)) * (6 * stages - 4);
  std::string why = std::to_string(iterations) + " iterations";
  if (microbatches > 0) why += " x " + std::to_string(microbatches) + " micro-batches";
  why += " x " + std::to_string(pipeline.stages.size()) + " stages";
  check_plan_ops(strategy, std::max(1, iterations) * per_iteration, why,
                 microbatches > 0 ? "fewer --iterations, micro-batches or stages" : "fewer --iterations or stages");
  return strategy;
}

}  // namespace

double static_bytes(const DeviceMemory& memory) {
  return memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes + memory.stashed_bytes;
}

PipelinePlanWriter::PipelinePlanWriter(std::string strategy, const Profile& profile, const Pipeline& pipeline,
                                       int32_t iterations, int64_t microbatches)
    : builder_(checked_plan_size(std::move(strategy), pipeline, iterations, microbatches),
               static_cast<int32_t>(pipeline.devices), std::max(iterations, 1), static_cast<double>(profile.batch_size)),
      pipeline_(pipeline),
      iterations_(iterations),
      microbatches_(static_cast<int32_t>(microbatches)),
      split_(std::max(1.0, static_cast<double>(microbatches))) {
  if (iterations < 1) throw InputError("--iterations", "is " + std::to_string(iterations), "at least 1 mini-batch");
  TRAINSIM_CHECK(microbatches >= 0 && microbatches <= kMaxPlanOps, "micro-batches per mini-batch");
  for (const PipelineStage& s : pipeline.stages) {
    workspace_bytes_.push_back(range_totals(profile, s.layers.first, s.layers.last).workspace_bytes);
  }
  const size_t per_direction =
      pipeline.boundaries.size() * static_cast<size_t>(iterations) * static_cast<size_t>(std::max<int64_t>(1, microbatches));
  transfers_.resize(2 * per_direction);
  unsettled_sends_.resize(static_cast<size_t>(pipeline.devices));
  compute_tail_.assign(static_cast<size_t>(pipeline.devices), -1);
}

int32_t PipelinePlanWriter::replica_worker(int32_t stage, int32_t replica) const {
  TRAINSIM_CHECK(replica >= 0 && replica < replicas(stage), "replica of a stage");
  return static_cast<int32_t>(pipeline_.stages[stage].first_device) + replica;
}

int32_t PipelinePlanWriter::worker_of(int32_t stage, int32_t iteration, int32_t microbatch) const {
  const int32_t turn = microbatches_ > 0 ? microbatch : iteration;
  return replica_worker(stage, turn % replicas(stage));
}

double PipelinePlanWriter::activation_bytes(int32_t stage) const {
  return pipeline_.stages[stage].activation_bytes / split_;
}

double PipelinePlanWriter::input_bytes(int32_t stage) const { return pipeline_.stages[stage].input_bytes / split_; }

Op PipelinePlanWriter::compute_op(OpKind kind, int32_t stage, int32_t iteration, int32_t microbatch,
                                  int32_t weight_version) const {
  const PipelineStage& s = pipeline_.stages[stage];
  Op op;
  op.kind = kind;
  op.stream = StreamKind::kCompute;
  op.worker = worker_of(stage, iteration, microbatch);
  op.stage = stage;
  op.microbatch = microbatches_ > 0 ? microbatch : -1;
  op.iteration = iteration;
  op.weight_version = weight_version;
  op.first_layer = static_cast<int32_t>(s.layers.first);
  op.last_layer = static_cast<int32_t>(s.layers.last);
  op.work_s = kind == OpKind::kBackward ? scaled_s(s.backward_s, s.backward_fixed_s, 1.0 / split_)
                                        : scaled_s(s.forward_s, s.forward_fixed_s, 1.0 / split_);
  return op;
}

size_t PipelinePlanWriter::transfer_index(Direction direction, int32_t boundary, int32_t iteration,
                                          int32_t microbatch) const {
  const size_t m = static_cast<size_t>(std::max(1, microbatches_));
  const size_t per_direction = pipeline_.boundaries.size() * static_cast<size_t>(iterations_) * m;
  return static_cast<size_t>(direction) * per_direction +
         (static_cast<size_t>(boundary) * static_cast<size_t>(iterations_) + static_cast<size_t>(iteration)) * m +
         static_cast<size_t>(std::max(0, microbatch));
}

OpId PipelinePlanWriter::receive(Direction direction, int32_t boundary, int32_t worker, int32_t peer,
                                 const Op& consumer) {
  Op recv;
  recv.kind = OpKind::kRecv;
  recv.stream = StreamKind::kRecv;
  recv.payload = direction == kActivations ? Payload::kActivation : Payload::kInputGradient;
  recv.worker = worker;
  recv.peer = peer;
  recv.stage = consumer.stage;
  recv.microbatch = consumer.microbatch;
  recv.iteration = consumer.iteration;
  TransferEnds& ends = transfers_[transfer_index(direction, boundary, consumer.iteration, consumer.microbatch)];
  TRAINSIM_CHECK(ends.recv < 0, "a transfer received twice");
  if (ends.send >= 0) recv.deps.push_back(ends.send);
  ends.recv = builder_.add(std::move(recv));
  return ends.recv;
}

void PipelinePlanWriter::send(Direction direction, int32_t boundary, int32_t worker, int32_t peer, OpId producer) {
  const Op& from = builder_.op(producer);
  Op send;
  send.kind = OpKind::kSend;
  send.stream = StreamKind::kSend;
  send.payload = direction == kActivations ? Payload::kActivation : Payload::kInputGradient;
  send.worker = worker;
  send.peer = peer;
  send.stage = from.stage;
  send.microbatch = from.microbatch;
  send.iteration = from.iteration;
  // Activations forward and their gradients back have the same size: the
  // bytes crossing the boundary (stages.hpp boundary_bytes), per op.
  send.bytes = pipeline_.boundaries[boundary].bytes / split_;
  send.deps = {producer};
  TransferEnds& ends = transfers_[transfer_index(direction, boundary, from.iteration, from.microbatch)];
  TRAINSIM_CHECK(ends.send < 0, "a transfer sent twice");
  ends.send = builder_.add(std::move(send));
  if (ends.recv >= 0) builder_.op(ends.recv).deps.push_back(ends.send);
  unsettled_sends_[worker].push_back(ends.send);
}

OpId PipelinePlanWriter::add_compute(Op op) {
  const int32_t w = op.worker;
  compute_tail_[w] = builder_.add(std::move(op));
  return compute_tail_[w];
}

OpId PipelinePlanWriter::forward(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version) {
  Op op = compute_op(OpKind::kForward, stage, iteration, microbatch, weight_version);
  op.alloc_bytes = activation_bytes(stage) + input_bytes(stage) + workspace_bytes(stage);
  op.free_bytes = workspace_bytes(stage);
  const int32_t w = op.worker;
  if (stage > 0)
    op.deps.push_back(receive(kActivations, stage - 1, w, worker_of(stage - 1, iteration, microbatch), op));
  const OpId id = add_compute(std::move(op));
  if (stage + 1 < stage_count()) send(kActivations, stage, w, worker_of(stage + 1, iteration, microbatch), id);
  return id;
}

OpId PipelinePlanWriter::backward(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version,
                                  double weight_share) {
  Op op = compute_op(OpKind::kBackward, stage, iteration, microbatch, weight_version);
  if (weight_share > 0) {
    op.gradients = GradientPart::kInputs;
    op.work_s *= 1 - weight_share;
  }
  op.alloc_bytes = workspace_bytes(stage);
  op.free_bytes = activation_bytes(stage) + input_bytes(stage) + workspace_bytes(stage);
  const int32_t w = op.worker;
  if (stage + 1 < stage_count()) {
    op.deps.push_back(receive(kGradients, stage, w, worker_of(stage + 1, iteration, microbatch), op));
  }
  const OpId id = add_compute(std::move(op));
  if (stage > 0) send(kGradients, stage - 1, w, worker_of(stage - 1, iteration, microbatch), id);
  return id;
}

OpId PipelinePlanWriter::weight_gradients(int32_t stage, int32_t iteration, int32_t microbatch, int32_t weight_version,
                                          double weight_share) {
  Op op = compute_op(OpKind::kBackward, stage, iteration, microbatch, weight_version);
  op.gradients = GradientPart::kWeights;
  op.work_s *= weight_share;
  op.alloc_bytes = workspace_bytes(stage);
  op.free_bytes = workspace_bytes(stage);
  return add_compute(std::move(op));
}

OpId PipelinePlanWriter::recompute(int32_t stage, int32_t iteration, int32_t weight_version) {
  Op op = compute_op(OpKind::kRecompute, stage, iteration, 0, weight_version);
  op.alloc_bytes = activation_bytes(stage) + workspace_bytes(stage);
  op.free_bytes = workspace_bytes(stage);
  return add_compute(std::move(op));
}

int32_t PipelinePlanWriter::stage_of_worker(int32_t worker) const {
  const auto after = std::upper_bound(pipeline_.stages.begin(), pipeline_.stages.end(), worker,
                                      [](int32_t w, const PipelineStage& s) { return w < s.first_device; });
  TRAINSIM_CHECK(after != pipeline_.stages.begin() && worker < pipeline_.devices, "a worker outside the pipeline");
  return static_cast<int32_t>(after - pipeline_.stages.begin() - 1);
}

OpId PipelinePlanWriter::update(int32_t worker, int32_t iteration, int32_t weight_version, std::vector<OpId> deps,
                                int32_t stage) {
  if (stage < 0) stage = stage_of_worker(worker);
  const PipelineStage& s = pipeline_.stages[stage];
  Op op;
  op.kind = OpKind::kUpdate;
  op.stream = StreamKind::kCompute;
  op.worker = worker;
  op.stage = stage;
  op.iteration = iteration;
  op.weight_version = weight_version;
  op.first_layer = static_cast<int32_t>(s.layers.first);
  op.last_layer = static_cast<int32_t>(s.layers.last);
  op.work_s = s.update_s;
  op.deps = std::move(deps);
  return add_compute(std::move(op));
}

OpId PipelinePlanWriter::allreduce(int32_t worker, int32_t iteration, std::vector<OpId> deps) {
  const int32_t stage = stage_of_worker(worker);
  const PipelineStage& s = pipeline_.stages[stage];
  std::vector<int32_t> members(static_cast<size_t>(s.replicas));
  std::iota(members.begin(), members.end(), static_cast<int32_t>(s.first_device));
  Op op;
  op.kind = OpKind::kAllReduce;
  op.stream = StreamKind::kSend;
  op.worker = worker;
  op.stage = stage;
  op.iteration = iteration;
  op.first_layer = static_cast<int32_t>(s.layers.first);
  op.last_layer = static_cast<int32_t>(s.layers.last);
  op.bytes = s.param_bytes;
  op.group = builder_.group(std::move(members));
  op.algorithm = CollectiveAlgorithm::kRing;
  op.deps = std::move(deps);
  return builder_.add(std::move(op));
}

OpId PipelinePlanWriter::synchronised_update(int32_t worker, int32_t iteration, int32_t weight_version) {
  std::vector<OpId> after;
  if (replicas(stage_of_worker(worker)) > 1) after = {allreduce(worker, iteration, compute_tail(worker))};
  return update(worker, iteration, weight_version, std::move(after));
}

OpId PipelinePlanWriter::barrier(int32_t worker, int32_t iteration, std::vector<OpId> deps) {
  Op op;
  op.kind = OpKind::kBarrier;
  op.stream = StreamKind::kCompute;
  op.worker = worker;
  op.iteration = iteration;
  if (all_workers_group_ < 0) {
    std::vector<int32_t> everyone(static_cast<size_t>(pipeline_.devices));
    std::iota(everyone.begin(), everyone.end(), 0);
    all_workers_group_ = builder_.group(std::move(everyone));
  }
  op.group = all_workers_group_;
  op.deps = std::move(deps);
  return add_compute(std::move(op));
}

std::vector<OpId> PipelinePlanWriter::take_sends(int32_t worker) {
  std::vector<OpId> sends;
  sends.swap(unsettled_sends_[worker]);
  return sends;
}

std::vector<OpId> PipelinePlanWriter::compute_tail(int32_t worker) const {
  if (compute_tail_[worker] < 0) return {};
  return {compute_tail_[worker]};
}

Plan PipelinePlanWriter::build() && {
  for (const TransferEnds& ends : transfers_) {
    TRAINSIM_CHECK((ends.send < 0) == (ends.recv < 0), "a boundary transfer without its other end");
  }
  builder_.set_iteration_period(static_cast<int32_t>(replicas(0)));
  return std::move(builder_).build();
}

std::vector<PipelineTask> one_f_one_b_program(const Pipeline& pipeline, int32_t stage, int32_t replica,
                                              int32_t iterations) {
  const auto r = static_cast<int32_t>(pipeline.stages[stage].replicas);
  std::vector<int32_t> mine;
  for (int32_t i = replica; i < iterations; i += r) mine.push_back(i);
  const auto count = static_cast<int32_t>(mine.size());
  const auto admitted = std::min(count, static_cast<int32_t>(one_f_one_b_in_flight(pipeline, stage)));
  std::vector<PipelineTask> program;
  program.reserve(2 * mine.size());
  for (int32_t t = 0; t < admitted; ++t) program.push_back({true, mine[t]});
  for (int32_t t = 0; t < count; ++t) {
    program.push_back({false, mine[t]});
    if (t + admitted < count) program.push_back({true, mine[t + admitted]});
  }
  return program;
}

std::vector<int32_t> replica_rounds(int32_t iterations, int32_t replicas) {
  std::vector<int32_t> sizes(static_cast<size_t>((iterations + replicas - 1) / replicas), replicas);
  if (iterations % replicas != 0) sizes.back() = iterations % replicas;
  return sizes;
}

}  // namespace trainsim
