// A transformer's whole 3-D parallel job as a plan (transformer_plan.hpp).
#include "sim/plan/transformer_plan.hpp"

#include <string>
#include <vector>

#include "model/error.hpp"
#include "sim/cost/transformer_memory.hpp"
#include "sim/cost/zero_bubble.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {
namespace {

// Writes the job's ops. A worker is (pipeline device k, data-parallel rank
// e, tensor-parallel rank q), rank (k·d + e)·t + q; interleaved over v
// chunks, device k runs virtual stages c·p + k.
class JobWriter {
 public:
  JobWriter(const TransformerConfig& c, const TransformerTraining& t, const TransformerStep& r,
            const GpuMachine& machine, int64_t global_batch, int32_t iterations)
      : c_(c),
        t_(t),
        r_(r),
        machine_(machine),
        m_(static_cast<int32_t>(r.microbatches)),
        iterations_(iterations),
        workers_(static_cast<size_t>(t.tensor * t.pipeline * t.data)),
        builder_("transformer", static_cast<int32_t>(workers_), iterations, static_cast<double>(global_batch)),
        transfers_(2 * static_cast<size_t>(t.virtual_stages) * workers_ * static_cast<size_t>(iterations) *
                   static_cast<size_t>(m_)),
        pending_(workers_),
        tensor_pending_(workers_, -1),
        tail_(workers_, -1) {
    // The groups: each stage's tensor-parallel groups, its data-parallel
    // groups (one per tensor-parallel rank), and everyone for the barrier.
    std::vector<int32_t> everyone(workers_);
    for (size_t w = 0; w < workers_; ++w) everyone[w] = static_cast<int32_t>(w);
    everyone_ = builder_.group(std::move(everyone));
    for (int64_t k = 0; k < t.pipeline; ++k) {
      for (int64_t e = 0; e < t.data; ++e) {
        std::vector<int32_t> members;
        for (int64_t q = 0; q < t.tensor; ++q) members.push_back(worker(k, e, q));
        tensor_groups_.push_back(builder_.group(std::move(members)));
      }
      for (int64_t q = 0; q < t.tensor; ++q) {
        std::vector<int32_t> members;
        for (int64_t e = 0; e < t.data; ++e) members.push_back(worker(k, e, q));
        data_groups_.push_back(builder_.group(std::move(members)));
      }
    }
  }

  void write() {
    for (int32_t i = 0; i < iterations_; ++i) {
      for (int64_t k = 0; k < t_.pipeline; ++k) {
        for (int64_t e = 0; e < t_.data; ++e) {
          for (int64_t q = 0; q < t_.tensor; ++q) write_worker(Where{k, e, q, worker(k, e, q)}, i);
        }
      }
    }
    for (size_t w = 0; w < workers_; ++w) {
      const TransformerTraining& t = t_;
      const double params = stage_params(static_cast<int64_t>(w) / (t.tensor * t.data));
      const ModelStates states = model_state_bytes(params, t.zero_stage, t.data, t.optimizer_bytes_per_param);
      PlanWorker& worker = builder_.worker(static_cast<int32_t>(w));
      worker.device = static_cast<int32_t>(w);
      worker.static_bytes = states.weights_bytes + states.gradients_bytes + states.optimizer_bytes;
    }
  }

  Plan build() && { return std::move(builder_).build(); }

 private:
  struct Where {
    int64_t k, e, q;  // device, data-parallel and tensor-parallel rank
    int32_t w;
    int64_t vs = 0;  // the virtual stage of the task being written (k without interleaving)
  };
  struct Ends {
    OpId send = -1, recv = -1;
  };

  int32_t worker(int64_t k, int64_t e, int64_t q) const {
    return static_cast<int32_t>((k * t_.data + e) * t_.tensor + q);
  }
  int64_t virtual_stages() const { return t_.pipeline * t_.virtual_stages; }
  // Layers a virtual stage (a device's chunk): l / (p·v).
  double layers() const { return static_cast<double>(c_.layers / virtual_stages()); }
  bool last(int64_t vs) const { return vs + 1 == virtual_stages(); }
  int32_t worker_of(int64_t vs, const Where& at) const { return worker(vs % t_.pipeline, at.e, at.q); }
  // A micro-batch's b·s·h 16-bit values, split over the tensor-parallel group.
  double boundary_bytes() const {
    return 2 * static_cast<double>(t_.micro_batch * c_.seq * c_.hidden) / static_cast<double>(t_.tensor);
  }
  // Parameters on a GPU of device k (its l/p layers): the first holds the
  // embeddings (first_stage_params), the last Llama's untied output layer.
  double stage_params(int64_t k) const {
    if (k == 0) return first_stage_params(c_, t_);
    const double vocabulary = static_cast<double>(c_.vocab * c_.hidden) / static_cast<double>(t_.tensor);
    return static_cast<double>(c_.layers / t_.pipeline) * block_params(c_, t_.tensor) +
           (c_.llama && k + 1 == t_.pipeline ? vocabulary : 0);
  }
  // A layer's weight products, the part of its backward ZB-H1 defers (W).
  double layer_weights_s() const {
    return r_.weight_share * (r_.layer_backward_s + (r_.tp_passes - 1) * r_.layer_tp_comm_s);
  }

  void write_worker(Where at, int32_t i) {
    const auto p = static_cast<int32_t>(t_.pipeline);
    if (t_.virtual_stages > 1) {
      for (const InterleavedTask& task :
           interleaved_1f1b_order(p, static_cast<int32_t>(t_.virtual_stages), m_, static_cast<int32_t>(at.k))) {
        at.vs = task.stage;
        if (task.forward) forward(at, i, task.microbatch);
        if (!task.forward) backward(at, i, task.microbatch);
      }
    } else {
      at.vs = at.k;
      for (const ZeroBubbleTask& task : zb_h1_order(p, static_cast<int32_t>(at.k), m_)) {
        if (task.kind == ZeroBubbleTask::kForward) forward(at, i, task.microbatch);
        if (task.kind == ZeroBubbleTask::kInput) backward(at, i, task.microbatch);
        if (task.kind == ZeroBubbleTask::kWeights && t_.zero_bubble) weight_gradients(at, i, task.microbatch);
      }
    }
    at.vs = at.k;
    finish(at, i);
  }

  // An op of the worker's on `stream`, for micro-batch mb of iteration i.
  static Op op_of(OpKind kind, StreamKind stream, const Where& at, int32_t i, int32_t mb) {
    Op op;
    op.kind = kind;
    op.stream = stream;
    op.worker = at.w;
    op.microbatch = mb;
    op.iteration = i;
    return op;
  }
  Op compute_op(OpKind kind, const Where& at, int32_t i, int32_t mb, double work_s) const {
    Op op = op_of(kind, StreamKind::kCompute, at, i, mb);
    op.stage = static_cast<int32_t>(at.vs);
    op.weight_version = i;
    op.first_layer = static_cast<int32_t>(static_cast<double>(at.vs) * layers());
    op.last_layer = static_cast<int32_t>(static_cast<double>(at.vs + 1) * layers()) - 1;
    op.work_s = work_s;
    return op;
  }
  // A compute op, after the worker's collectives pending since its last one.
  OpId compute(Op op) {
    const auto w = static_cast<size_t>(op.worker);
    op.deps.insert(op.deps.end(), pending_[w].begin(), pending_[w].end());
    pending_[w].clear();
    tensor_pending_[w] = -1;
    tail_[w] = builder_.add(std::move(op));
    return tail_[w];
  }
  // What the worker's next transfer waits for: its pass's tensor-parallel all-reduce, else `op`.
  OpId done(int32_t w, OpId op) const {
    const OpId pending = tensor_pending_[static_cast<size_t>(w)];
    return pending >= 0 ? pending : op;
  }
  // A collective on the worker's `stream` (its send stream unless said);
  // with `wait`, its next compute op waits for it.
  OpId collective(OpKind kind, const Where& at, int32_t i, int32_t mb, int32_t group, double bytes, int32_t repeat,
                  std::vector<OpId> deps = {}, bool wait = true, StreamKind stream = StreamKind::kSend) {
    Op op = op_of(kind, stream, at, i, mb);
    op.stage = static_cast<int32_t>(at.k);
    op.group = group;
    op.bytes = bytes;
    op.repeat = repeat;
    op.deps = std::move(deps);
    const OpId id = builder_.add(std::move(op));
    if (wait) pending_[static_cast<size_t>(at.w)].push_back(id);
    return id;
  }

  // The tensor-parallel group's all-reduces after a pass of the stage's
  // layers: two of b·s·h 16-bit values a layer a pass, one op standing for
  // them all (Op::repeat), on the compute stream: Megatron-LM issues them
  // where the layers compute and the next product waits for each, while
  // ZeRO's gathers and scatters and the pipeline's sends run beside them.
  void tensor_all_reduce(const Where& at, int32_t i, int32_t mb, OpId after, int passes) {
    if (t_.tensor == 1 || passes == 0) return;
    const auto repeat = static_cast<int32_t>(2 * passes * c_.layers / virtual_stages());
    tensor_pending_[static_cast<size_t>(at.w)] =
        collective(OpKind::kAllReduce, at, i, mb, tensor_groups_[static_cast<size_t>(at.k * t_.data + at.e)],
                   static_cast<double>(repeat) * boundary_bytes() * static_cast<double>(t_.tensor), repeat, {after},
                   true, StreamKind::kCompute);
  }

  // ZeRO-2 and -3 (no pipeline): a layer's 16-bit weights (gathered) or
  // gradients (reduce-scattered) over the data-parallel group, and the
  // vocabulary's table (GPT's one, Llama's two) with the layers'.
  int32_t data_group(const Where& at) const { return data_groups_[static_cast<size_t>(at.k * t_.tensor + at.q)]; }
  double layer_bytes() const { return 2 * block_params(c_, t_.tensor); }
  double pass_bytes() const {
    return layers() * layer_bytes() +
           2 * (c_.llama ? 2 : 1) * static_cast<double>(c_.vocab * c_.hidden) / static_cast<double>(t_.tensor);
  }
  int32_t layer_count() const { return static_cast<int32_t>(c_.layers / virtual_stages()); }

  // The transfer across virtual-stage boundary `boundary` (between virtual
  // stages boundary and boundary + 1) of the worker's lane (e, q).
  size_t transfer(int direction, const Where& at, int64_t boundary, int32_t i, int32_t mb) const {
    const size_t lanes = static_cast<size_t>(virtual_stages()) * workers_ / static_cast<size_t>(t_.pipeline);
    const size_t lane = static_cast<size_t>((boundary * t_.data + at.e) * t_.tensor + at.q);
    return ((static_cast<size_t>(direction) * lanes + lane) * static_cast<size_t>(iterations_) +
            static_cast<size_t>(i)) *
               static_cast<size_t>(m_) +
           static_cast<size_t>(mb);
  }
  OpId receive(int direction, const Where& at, int64_t boundary, int32_t from, int32_t i, int32_t mb) {
    Op op = op_of(OpKind::kRecv, StreamKind::kRecv, at, i, mb);
    op.payload = direction == 0 ? Payload::kActivation : Payload::kInputGradient;
    op.peer = from;
    Ends& ends = transfers_[transfer(direction, at, boundary, i, mb)];
    if (ends.send >= 0) op.deps.push_back(ends.send);
    ends.recv = builder_.add(std::move(op));
    return ends.recv;
  }
  void send(int direction, const Where& at, int64_t boundary, int32_t to, int32_t i, int32_t mb, OpId after) {
    Op op = op_of(OpKind::kSend, StreamKind::kSend, at, i, mb);
    op.payload = direction == 0 ? Payload::kActivation : Payload::kInputGradient;
    op.peer = to;
    op.bytes = boundary_bytes();
    op.deps = {after};
    Ends& ends = transfers_[transfer(direction, at, boundary, i, mb)];
    ends.send = builder_.add(std::move(op));
    if (ends.recv >= 0) builder_.op(ends.recv).deps.push_back(ends.send);
    // Megatron-LM's 1F1B waits for its point-to-point transfers before it
    // computes on (p2p_communication.py: the requests' wait()).
    pending_[static_cast<size_t>(at.w)].push_back(ends.send);
  }

  void forward(const Where& at, int32_t i, int32_t mb) {
    Op op = compute_op(OpKind::kForward, at, i, mb,
                       layers() * r_.layer_forward_s + (last(at.vs) ? r_.output_compute_s / 3 : 0));
    if (at.vs > 0) op.deps.push_back(receive(0, at, at.vs - 1, worker_of(at.vs - 1, at), i, mb));
    OpId rest = -1;
    if (t_.zero_stage == 3) {
      // The first layer's weights before the forward starts; the others
      // (prefetched a layer ahead) beside it, which the backward waits for.
      op.deps.push_back(collective(OpKind::kAllGather, at, i, mb, data_group(at), layer_bytes(), 1, {}, false));
      rest = collective(OpKind::kAllGather, at, i, mb, data_group(at), pass_bytes(), layer_count(), {}, false);
    }
    op.alloc_bytes = layers() * layer_activation_bytes(c_, t_);
    const OpId id = compute(std::move(op));
    if (rest >= 0) pending_[static_cast<size_t>(at.w)].push_back(rest);
    tensor_all_reduce(at, i, mb, id, 1);
    if (!last(at.vs)) send(0, at, at.vs, worker_of(at.vs + 1, at), i, mb, done(at.w, id));
  }
  // The backward (with ZB-H1, its input gradients alone): the recomputed
  // forward's and the backward's all-reduces after it.
  void backward(const Where& at, int32_t i, int32_t mb) {
    const double output = last(at.vs) ? 2 * r_.output_compute_s / 3 : 0;
    double work = layers() * r_.layer_backward_s + output;
    if (t_.zero_bubble) work -= layers() * layer_weights_s() + output / 2;
    Op op = compute_op(OpKind::kBackward, at, i, mb, work);
    if (t_.zero_bubble) op.gradients = GradientPart::kInputs;
    if (!last(at.vs)) op.deps.push_back(receive(1, at, at.vs, worker_of(at.vs + 1, at), i, mb));
    op.free_bytes = layers() * layer_activation_bytes(c_, t_);
    std::vector<OpId> beside;
    if (t_.zero_stage >= 2) {
      // Beside the backward (from when it can start: after the forward):
      // ZeRO-3's gathers again, then the gradients' reduce-scatter, layer by
      // layer; the first layer's scatter after it.
      const std::vector<OpId> after_forward = {tail_[static_cast<size_t>(at.w)]};
      if (t_.zero_stage == 3) {
        beside.push_back(collective(OpKind::kAllGather, at, i, mb, data_group(at), pass_bytes(), layer_count(),
                                    after_forward, false));
      }
      beside.push_back(collective(OpKind::kReduceScatter, at, i, mb, data_group(at), pass_bytes(), layer_count(),
                                  after_forward, false));
    }
    const OpId id = compute(std::move(op));
    if (!beside.empty()) {
      beside.push_back(id);
      collective(OpKind::kReduceScatter, at, i, mb, data_group(at), layer_bytes(), 1, beside);
    }
    tensor_all_reduce(at, i, mb, id, r_.tp_passes - 1);
    if (at.vs > 0) send(1, at, at.vs - 1, worker_of(at.vs - 1, at), i, mb, done(at.w, id));
  }
  void weight_gradients(const Where& at, int32_t i, int32_t mb) {
    Op op = compute_op(OpKind::kBackward, at, i, mb,
                       layers() * layer_weights_s() + (last(at.vs) ? r_.output_compute_s / 3 : 0));
    op.gradients = GradientPart::kWeights;
    compute(std::move(op));
  }
  // After the drain: the stage's data-parallel all-reduce of its 16-bit
  // gradients, Adam over its parameters (over d with ZeRO-1), a barrier of
  // every worker.
  void finish(const Where& at, int32_t i) {
    const double params = stage_params(at.k);
    if (t_.data > 1 && t_.zero_stage <= 1) {
      collective(OpKind::kAllReduce, at, i, -1, data_group(at), 2 * params, 1,
                 {done(at.w, tail_[static_cast<size_t>(at.w)])});
    }
    const double shards = t_.zero_stage >= 1 ? static_cast<double>(t_.data) : 1.0;
    const OpId update =
        compute(compute_op(OpKind::kUpdate, at, i, -1, 28.0 * params / shards / machine_.memory_bytes_per_s));
    // ZeRO-2: every member's updated shard gathered into the whole weights.
    if (t_.data > 1 && t_.zero_stage == 2) {
      collective(OpKind::kAllGather, at, i, -1, data_group(at), 2 * params, 1, {update});
    }
    Op barrier = op_of(OpKind::kBarrier, StreamKind::kCompute, at, i, -1);
    barrier.group = everyone_;
    compute(std::move(barrier));
  }

  const TransformerConfig& c_;
  const TransformerTraining& t_;
  const TransformerStep& r_;
  const GpuMachine& machine_;
  int32_t m_;
  int32_t iterations_;
  size_t workers_;
  PlanBuilder builder_;
  std::vector<Ends> transfers_;  // per direction, boundary lane, iteration and micro-batch
  std::vector<std::vector<OpId>> pending_;  // per worker: collectives its next compute op waits for
  std::vector<OpId> tensor_pending_;        // per worker: its pass's tensor-parallel all-reduce, if any
  std::vector<OpId> tail_;       // per worker: its last compute op
  int32_t everyone_ = -1;
  std::vector<int32_t> tensor_groups_, data_groups_;  // per (stage, data rank) and (stage, tensor rank)
};

}  // namespace

TransformerJob transformer_job(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                               const GpuMachine& machine, const StepAssumptions& a, int32_t iterations) {
  const TransformerStep r = transformer_step(c, t, global_batch, machine, a);
  const int64_t gpus = t.tensor * t.pipeline * t.data;
  if (gpus > machine.gpus && gpus % machine.gpus != 0) {
    throw InputError("data", std::to_string(gpus) + " GPUs in all",
                     "whole machines of " + std::to_string(machine.gpus) + " (t·p·d a multiple of them)");
  }
  check_plan_ops(
      "transformer",
      static_cast<double>(gpus) * iterations * (9.0 * static_cast<double>(r.microbatches * t.virtual_stages) + 3),
      "t·p·d GPUs × iterations × micro-batches × chunks", "fewer micro-batches (a larger --micro-batch) or GPUs");
  JobWriter writer(c, t, r, machine, global_batch, iterations);
  writer.write();
  TransformerJob job;
  job.plan = std::move(writer).build();
  Cluster& cl = job.cluster;
  cl.name = machine.name + "-job";
  cl.machines = gpus > machine.gpus ? gpus / machine.gpus : 1;
  cl.devices_per_machine = gpus > machine.gpus ? machine.gpus : gpus;
  cl.description = std::to_string(cl.machines) + " " + machine.name + " machines of " +
                   std::to_string(cl.devices_per_machine) + " GPUs, NVLink inside, their NICs between";
  cl.device = {machine.name + " GPU", "gpu", machine.memory_bytes, machine.peak_flops_per_s,
               machine.memory_bytes_per_s};
  cl.intra_link = {machine.nvlink_bytes_per_s * a.link_efficiency, a.collective_latency_s};
  // A machine's NICs as one port: its GPUs' flows across share their sum.
  cl.inter_link = {static_cast<double>(cl.devices_per_machine) * machine.network_bytes_per_s * a.link_efficiency,
                   a.collective_latency_s};
  cl.host = {25e9, 5e-6, 100e9, 8, 5e-6};
  // NCCL reduces as it copies: no separate reduction time (the closed form's γ = 0).
  cl.collective = {1e18, 0};
  return job;
}

}  // namespace trainsim
