// Plan IR: names, the builder, validation and the JSON dump.
#include "sim/plan/plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/error.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

[[noreturn]] void broken(const Plan& plan, OpId id, const std::string& what) {
  throw std::logic_error(plan.strategy + " plan: op " + std::to_string(id) + " (" +
                         op_kind_name(plan.ops[id].kind) + "): " + what);
}

// Kahn's algorithm over deps and stream order: every op must become ready.
// The edges are held flat (offsets into one array), not a vector per op.
void check_acyclic(const Plan& plan) {
  const size_t n = plan.ops.size();
  std::vector<int32_t> waiting(n, 0);
  std::vector<int64_t> offsets(n + 1, 0);  // op i's successors: after[offsets[i], offsets[i + 1])
  auto for_each_edge = [&](auto&& edge) {
    for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
      for (OpId dep : plan.ops[id].deps) edge(dep, id);
    }
    for (const auto& worker : plan.streams) {
      for (const auto& stream : worker) {
        for (size_t i = 1; i < stream.size(); ++i) edge(stream[i - 1], stream[i]);
      }
    }
  };
  for_each_edge([&](OpId from, OpId to) {
    ++offsets[static_cast<size_t>(from) + 1];
    ++waiting[static_cast<size_t>(to)];
  });
  for (size_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  std::vector<OpId> after(static_cast<size_t>(offsets[n]));
  {
    std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
    for_each_edge([&](OpId from, OpId to) { after[static_cast<size_t>(fill[static_cast<size_t>(from)]++)] = to; });
  }
  std::vector<OpId> ready;
  for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
    if (waiting[id] == 0) ready.push_back(id);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const OpId id = ready.back();
    ready.pop_back();
    ++done;
    for (int64_t e = offsets[static_cast<size_t>(id)]; e < offsets[static_cast<size_t>(id) + 1]; ++e) {
      const OpId next = after[static_cast<size_t>(e)];
      if (--waiting[next] == 0) ready.push_back(next);
    }
  }
  if (done != n) {
    const auto stuck = std::find_if(waiting.begin(), waiting.end(), [](int32_t w) { return w > 0; });
    broken(plan, static_cast<OpId>(stuck - waiting.begin()), "can never start (a cycle through deps and stream order)");
  }
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kForward: return "forward";
    case OpKind::kBackward: return "backward";
    case OpKind::kRecompute: return "recompute";
    case OpKind::kUpdate: return "update";
    case OpKind::kCompress: return "compress";
    case OpKind::kDecompress: return "decompress";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduceScatter:
      return "reducescatter";
    case OpKind::kAllGather:
      return "allgather";
    case OpKind::kCopyToHost: return "copy_to_host";
    case OpKind::kCopyToDevice: return "copy_to_device";
    case OpKind::kHostAccumulate: return "host_accumulate";
    case OpKind::kServerStep: return "server_step";
    case OpKind::kBarrier: return "barrier";
  }
  return "?";
}

const char* stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kSend: return "send";
    case StreamKind::kRecv: return "recv";
    case StreamKind::kDeviceToHost: return "device_to_host";
    case StreamKind::kHostToDevice: return "host_to_device";
    case StreamKind::kHost: return "host";
  }
  return "?";
}

const char* payload_name(Payload payload) {
  switch (payload) {
    case Payload::kNone: return "none";
    case Payload::kActivation: return "activation";
    case Payload::kInputGradient: return "input_gradient";
    case Payload::kParamGradient: return "param_gradient";
    case Payload::kWeights: return "weights";
    case Payload::kSparseRows: return "sparse_rows";
  }
  return "?";
}

const char* weight_policy_name(WeightPolicy policy) {
  switch (policy) {
    case WeightPolicy::kLatest: return "latest";
    case WeightPolicy::kStashed: return "stashed";
    case WeightPolicy::kPredicted: return "predicted";
  }
  return "?";
}

const char* codec_name(Codec codec) {
  switch (codec) {
    case Codec::kNone: return "none";
    case Codec::kTrunc16: return "trunc16";
    case Codec::kQuant8: return "quant8";
  }
  return "?";
}

const char* gradient_part_name(GradientPart part) {
  switch (part) {
    case GradientPart::kBoth:
      return "both";
    case GradientPart::kInputs:
      return "inputs";
    case GradientPart::kWeights:
      return "weights";
  }
  return "?";
}

const char* server_rule_name(ServerRule rule) {
  switch (rule) {
    case ServerRule::kSparseRows: return "sparse_rows";
    case ServerRule::kDense: return "dense";
  }
  return "?";
}

PlanBuilder::PlanBuilder(std::string strategy, int32_t workers, int32_t iterations, double samples_per_iteration) {
  plan_.strategy = std::move(strategy);
  plan_.iterations = iterations;
  plan_.samples_per_iteration = samples_per_iteration;
  plan_.workers.resize(workers);
  for (int32_t w = 0; w < workers; ++w) plan_.workers[w].device = w;
  plan_.streams.assign(workers, std::vector<std::vector<OpId>>(kStreamKinds));
}

void check_plan_ops(const std::string& strategy, double ops, const std::string& why, const std::string& reduce) {
  if (ops <= static_cast<double>(kMaxPlanOps)) return;
  throw InputError(strategy + " plan", "would hold at least " + format_count(ops) + " ops (" + why + ")",
                   "at most " + format_count(static_cast<double>(kMaxPlanOps)) + " ops: " + reduce);
}

OpId PlanBuilder::add(Op op) {
  const OpId id = static_cast<OpId>(plan_.ops.size());
  if (id >= kMaxPlanOps) {
    throw InputError(plan_.strategy + " plan", "would hold more than " + format_count(static_cast<double>(kMaxPlanOps)) +
                                                   " ops (the limit), " + std::to_string(id) + " by iteration " +
                                                   std::to_string(op.iteration + 1) + " of " +
                                                   std::to_string(plan_.iterations),
                     "fewer --iterations, or fewer workers, stages, micro-batches, buckets, chunks or layers");
  }
  if (op.worker < 0 || op.worker >= static_cast<int32_t>(plan_.workers.size())) {
    throw std::logic_error(plan_.strategy + " plan: op on worker " + std::to_string(op.worker) +
                           " of " + std::to_string(plan_.workers.size()));
  }
  plan_.streams[op.worker][static_cast<int>(op.stream)].push_back(id);
  plan_.ops.push_back(std::move(op));
  return id;
}

int32_t PlanBuilder::group(std::vector<int32_t> members) {
  std::sort(members.begin(), members.end());
  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    if (plan_.groups[g] == members) return static_cast<int32_t>(g);
  }
  plan_.groups.push_back(std::move(members));
  return static_cast<int32_t>(plan_.groups.size() - 1);
}

Plan PlanBuilder::build() && {
  validate_plan(plan_);
  return std::move(plan_);
}

void validate_plan(const Plan& plan) {
  const auto n = static_cast<OpId>(plan.ops.size());
  const auto workers = static_cast<int32_t>(plan.workers.size());
  for (OpId id = 0; id < n; ++id) {
    const Op& op = plan.ops[id];
    if (op.worker < 0 || op.worker >= workers) broken(plan, id, "worker out of range");
    for (OpId dep : op.deps) {
      if (dep < 0 || dep >= n || dep == id) broken(plan, id, "dependency " + std::to_string(dep) + " out of range");
    }
    if (op.work_s < 0 || op.bytes < 0 || op.alloc_bytes < 0 || op.free_bytes < 0) {
      broken(plan, id, "negative time or bytes");
    }
    if (is_collective(op.kind)) {
      if (op.group < 0 || op.group >= static_cast<int32_t>(plan.groups.size())) broken(plan, id, "no group");
      const auto& members = plan.groups[op.group];
      if (!std::binary_search(members.begin(), members.end(), op.worker)) broken(plan, id, "not in its group");
    }
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      if (op.peer < 0 || op.peer >= workers || op.peer == op.worker) broken(plan, id, "bad peer");
    }
    if (op.kind == OpKind::kRecv) {
      const bool paired = std::any_of(op.deps.begin(), op.deps.end(), [&](OpId dep) {
        const Op& s = plan.ops[dep];
        return s.kind == OpKind::kSend && s.worker == op.peer && s.peer == op.worker;
      });
      if (!paired) broken(plan, id, "a recv must depend on its peer's send");
    }
    if (op.kind == OpKind::kServerStep) {
      const bool serves = std::any_of(plan.servers.begin(), plan.servers.end(), [&](const PlanServer& s) {
        return s.first_layer == op.first_layer && s.last_layer == op.last_layer;
      });
      if (!serves || op.stream != StreamKind::kHost) broken(plan, id, "a server step is a server's, on a host stream");
    }
    const bool sized_collective =
        op.kind == OpKind::kAllReduce || op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllGather;
    if (op.repeat < 1 || (op.repeat > 1 && !sized_collective)) {
      broken(plan, id, "only a reducing or gathering collective stands for several, and each op for at least one");
    }
    if (op.gradients != GradientPart::kBoth && op.kind != OpKind::kBackward) {
      broken(plan, id, "only a backward computes part of its gradients");
    }
    if (op.weights == WeightPolicy::kPredicted && (op.weight_ahead < 1 || op.weight_version < op.weight_ahead)) {
      broken(plan, id, "predicted weights need 1 <= weight_ahead <= weight_version");
    }
  }
  for (const PlanServer& s : plan.servers) {
    if (s.first_layer < 0 || s.last_layer < s.first_layer) {
      throw std::logic_error(plan.strategy + " plan: a server without layers");
    }
  }
  if (plan.iteration_period < 1) throw std::logic_error(plan.strategy + " plan: iteration period below 1");
  if (plan.drain_iterations < 0) throw std::logic_error(plan.strategy + " plan: negative drain iterations");
  size_t listed = 0;
  for (const auto& worker : plan.streams) {
    for (const auto& stream : worker) listed += stream.size();
  }
  if (listed != plan.ops.size()) throw std::logic_error(plan.strategy + " plan: streams do not list every op once");
  check_acyclic(plan);
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json ops = nlohmann::json::array();
  for (OpId id = 0; id < static_cast<OpId>(plan.ops.size()); ++id) {
    const Op& op = plan.ops[id];
    nlohmann::json j = {{"id", id},
                        {"op", op_kind_name(op.kind)},
                        {"worker", op.worker},
                        {"stream", stream_kind_name(op.stream)},
                        {"iteration", op.iteration}};
    if (op.stage >= 0) j["stage"] = op.stage;
    if (op.microbatch >= 0) j["microbatch"] = op.microbatch;
    if (op.weight_version >= 0) j["weight_version"] = op.weight_version;
    if (op.weights != WeightPolicy::kLatest) j["weights"] = weight_policy_name(op.weights);
    if (op.weights == WeightPolicy::kPredicted) j["weight_ahead"] = op.weight_ahead;
    if (op.first_layer >= 0) j["layers"] = {op.first_layer, op.last_layer};
    if (op.work_s > 0) j["work_s"] = op.work_s;
    if (op.bytes > 0) j["bytes"] = op.bytes;
    if (op.peer >= 0) j["peer"] = op.peer;
    if (op.payload != Payload::kNone) j["payload"] = payload_name(op.payload);
    if (op.group >= 0) j["group"] = op.group;
    if (op.kind == OpKind::kAllReduce) {
      j["algorithm"] = collective_algorithm_name(op.algorithm);
      if (op.codec != Codec::kNone) j["codec"] = codec_name(op.codec);
      if (op.dense_only) j["dense_only"] = true;
    }
    if (op.repeat > 1) j["repeat"] = op.repeat;
    if (op.gradients != GradientPart::kBoth) j["gradients"] = gradient_part_name(op.gradients);
    if (op.alloc_bytes > 0) j["alloc_bytes"] = op.alloc_bytes;
    if (op.free_bytes > 0) j["free_bytes"] = op.free_bytes;
    if (!op.deps.empty()) j["deps"] = op.deps;
    ops.push_back(std::move(j));
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const PlanWorker& w : plan.workers) workers.push_back({{"device", w.device}, {"static_bytes", w.static_bytes}});
  nlohmann::json servers = nlohmann::json::array();
  for (const PlanServer& s : plan.servers) {
    servers.push_back({{"layers", {s.first_layer, s.last_layer}}, {"rule", server_rule_name(s.rule)}});
  }
  return {{"format", "trainsim.plan/1"},     {"strategy", plan.strategy}, {"config", plan.config},
          {"iterations", plan.iterations},   {"samples_per_iteration", plan.samples_per_iteration}, {"iteration_period", plan.iteration_period}, {"drain_iterations", plan.drain_iterations},
          {"workers", std::move(workers)},   {"servers", std::move(servers)},
          {"gathers_sparse_rows", plan.gathers_sparse_rows},
          {"groups", plan.groups},           {"ops", std::move(ops)}};
}

}  // namespace trainsim
