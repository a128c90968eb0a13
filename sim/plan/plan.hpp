// The plan IR: the exact ordered operations each worker performs for a
// strategy. One plan, two interpreters: sim/des times it on a cluster, exec
// runs it for real; both write the same trace. A worker has in-order streams;
// an op waits for the op before it on its stream and for its `deps`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

using OpId = int32_t;  // index into Plan::ops

// In-order queues of a worker (a device and its host-side helpers).
enum class StreamKind : uint8_t {
  kCompute,       // forward, backward, recompute, update, compress, decompress
  kSend,          // outgoing point-to-point transfers and collectives
  kRecv,          // incoming point-to-point transfers
  kDeviceToHost,  // copies to host memory (CGDP)
  kHostToDevice,  // copies back (CGDP)
  kHost,          // host threads: accumulation of gradients on the CPU
};
inline constexpr int kStreamKinds = 6;

enum class OpKind : uint8_t {
  kForward,         // compute: layers [first_layer, last_layer] of one (micro-)batch
  kBackward,        // compute: their input and weight gradients
  kRecompute,       // compute: forward again to rebuild activations (DSP, GPipe with recompute)
  kUpdate,          // compute: optimizer step on the worker's layers
  kCompress,        // compute: gradient compression before communication (Pipe-SGD)
  kDecompress,      // compute: and back
  kSend,            // kSend stream: `bytes` to worker `peer`; occupies the links between them
  kRecv,            // kRecv stream: completes when the Send it depends on completes
  kAllReduce,       // kSend stream: one op per member of `group`; the members run it jointly
  kBroadcast,       // kSend stream: from the group's first member to the others, jointly
  kCopyToHost,      // kDeviceToHost stream: `bytes` over the worker's host link
  kCopyToDevice,    // kHostToDevice stream: `bytes` back over the host link
  kHostAccumulate,  // kHost stream: host threads sum `bytes` (all workers' copies of a chunk)
  kServerStep,      // kHost stream of the worker whose machine runs it: the server of layers
                    // [first_layer, last_layer] sums the round's pushes, steps those variables and
                    // answers the pulls; `work_s` at nominal speed (Parallax)
  kBarrier,         // any stream: zero-time join of every member of `group`
  kReduceScatter,   // kSend stream: jointly, each member ends with its 1/n of the sum of `bytes` (ZeRO)
  kAllGather,       // kSend stream: jointly, each member ends with all `bytes`, 1/n from each (ZeRO)
};

// What a kSend carries (the executor moves it; the simulator times `bytes`).
enum class Payload : uint8_t {
  kNone,           // not a send
  kActivation,     // a forward's (or recompute's) output, to the next stage
  kInputGradient,  // a backward's gradient w.r.t. its input, to the previous stage
  kParamGradient,  // parameter gradients of `first_layer`..`last_layer` (a push)
  kWeights,        // an update's new weights of those layers (a pull)
  kSparseRows,     // sparse gradient rows, relayed around the ring (Parallax ar)
};

// Which weights a compute op (forward, backward, recompute) reads.
enum class WeightPolicy : uint8_t {
  kLatest,     // those the worker holds when the op runs (version `weight_version`)
  kStashed,    // version `weight_version`, kept from before later updates (weight stashing)
  kPredicted,  // SpecTrain: predicted `weight_ahead` versions past the worker's current ones,
               // which are version weight_version − weight_ahead
};

// Which gradients a kBackward computes: both (every strategy but the
// zero-bubble ones), or its input gradient alone (B: what the stage before
// waits for) and, in a later op, its weight gradients alone (W: what the
// update waits for; Qi et al. 2023, "Zero Bubble Pipeline Parallelism").
enum class GradientPart : uint8_t { kBoth, kInputs, kWeights };

// How an AllReduce encodes what it sends at every hop (Pipe-SGD's compression).
enum class Codec : uint8_t { kNone, kTrunc16, kQuant8 };

struct Op {
  OpKind kind = OpKind::kForward;
  StreamKind stream = StreamKind::kCompute;
  Payload payload = Payload::kNone;               // kSend (and its kRecv): what it carries
  WeightPolicy weights = WeightPolicy::kLatest;   // compute ops reading weights
  int32_t worker = 0;          // device index, 0..Plan::workers-1
  int32_t stage = -1;          // pipeline stage (or data-parallel replica), -1 if none
  int32_t microbatch = -1;     // micro-batch within the mini-batch, -1 if none
  int32_t iteration = 0;       // training iteration (mini-batch) this op belongs to
  int32_t weight_version = -1; // weight version the op reads (compute ops); -1 if none
  int32_t first_layer = -1;    // layers computed, or whose gradients are carried; -1 if none
  int32_t last_layer = -1;
  double work_s = 0;           // compute ops: duration at nominal speed, from the profile
  double bytes = 0;            // transfers, collectives, copies, host accumulation
  int32_t peer = -1;           // kSend: destination worker; kRecv: source worker
  int32_t group = -1;          // collectives and barriers: index into Plan::groups
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;  // kAllReduce
  Codec codec = Codec::kNone;  // kAllReduce: the hops' encoding
  GradientPart gradients = GradientPart::kBoth;  // kBackward: which gradients it computes
  int32_t repeat = 1;          // kAllReduce, kReduceScatter, kAllGather: stands for this many back to back,
                               // of bytes / repeat each
                               // (a transformer stage's tensor-parallel all-reduces of one pass)
  bool dense_only = false;     // kAllReduce: reduces the dense variables only, sparse ones stay (Parallax)
  int16_t weight_ahead = 0;    // WeightPolicy::kPredicted: versions predicted ahead (SpecTrain's s < 2·stages)
  double alloc_bytes = 0;      // memory the op allocates when it starts (activations, buffers)
  double free_bytes = 0;       // memory it releases when it ends
  std::vector<OpId> deps;      // ops (of any worker or stream) that must end before it starts
};

struct PlanWorker {
  int32_t device = 0;        // device index on the cluster (machines filled in order)
  double static_bytes = 0;   // memory held throughout: weights, gradients, optimizer state, stashes
};

// How a parameter server updates its variables (Parallax): the optimizer on
// the touched rows of a sparse table, or on dense variables, each time on the
// mean of the workers' pushes.
enum class ServerRule : uint8_t { kSparseRows, kDense };

// A parameter server beside the workers: it owns layers [first_layer,
// last_layer]; the workers' kCopyToHost pushes their gradients to every server
// (and asks for the rows their next forward reads), its kServerStep ops
// step the variables and answer, and kCopyToDevice takes the new values (a
// worker's update then leaves served dense layers alone).
struct PlanServer {
  int32_t first_layer = 0;
  int32_t last_layer = 0;
  ServerRule rule = ServerRule::kSparseRows;
};

struct Plan {
  // What the tools print and validate re-reads; no interpreter reads either:
  // every op carries what it needs.
  std::string strategy;                      // strategy id
  nlohmann::json config = nlohmann::json::object();  // resolved settings
  int32_t iterations = 0;                    // mini-batches the plan trains
  double samples_per_iteration = 0;          // samples the whole job trains per iteration
  int32_t iteration_period = 1;              // iterations end in groups of this many in steady state
                                             // (a replicated input stage finishes r mini-batches a round)
  int64_t drain_iterations = 0;              // this many last iterations end in the plan's drain, not in
                                             // steady state: pipesgd's K-1 pending updates run back to back,
                                             // dsp's last m_0 end in block 0's steps without a forward
                                             // (may exceed `iterations`: then all of them do)
  std::vector<PlanWorker> workers;
  std::vector<PlanServer> servers;           // parameter servers, in order (sparse ones first)
  bool gathers_sparse_rows = false;          // updates add the sparse rows the ring gathered (Parallax ar)
  std::vector<std::vector<int32_t>> groups;  // collective/barrier groups: member workers, ascending
  std::vector<Op> ops;                       // every op; ids are indices
  // streams[w][k]: op ids of worker w's stream k (StreamKind k) in program order.
  std::vector<std::vector<std::vector<OpId>>> streams;
};

const char* op_kind_name(OpKind kind);
const char* stream_kind_name(StreamKind kind);
const char* payload_name(Payload payload);
const char* weight_policy_name(WeightPolicy policy);
const char* codec_name(Codec codec);
const char* gradient_part_name(GradientPart part);
const char* server_rule_name(ServerRule rule);
constexpr bool is_compute(OpKind kind) {
  return kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kRecompute ||
         kind == OpKind::kUpdate || kind == OpKind::kCompress || kind == OpKind::kDecompress;
}
constexpr bool is_collective(OpKind kind) {  // kAllReduce, kBroadcast, kBarrier, kReduceScatter, kAllGather
  return kind == OpKind::kAllReduce || kind == OpKind::kBroadcast || kind == OpKind::kBarrier ||
         kind == OpKind::kReduceScatter || kind == OpKind::kAllGather;
}

// A compute op's kind as a GPU worker's host time per op prices it
// (DeviceSpec::host_per_op): a forward's (a recompute's too), a backward's
// or an update's; kNone for the others.
enum class HostKind : int8_t { kNone = -1, kForward, kBackward, kUpdate };
constexpr HostKind host_kind(OpKind kind) {
  if (kind == OpKind::kForward || kind == OpKind::kRecompute) return HostKind::kForward;
  if (kind == OpKind::kBackward) return HostKind::kBackward;
  return kind == OpKind::kUpdate ? HostKind::kUpdate : HostKind::kNone;
}

// The layers an op spans: last_layer − first_layer + 1, 0 for one over none.
constexpr int64_t layers_spanned(const Op& op) {
  return op.first_layer < 0 || op.last_layer < op.first_layer ? 0 : int64_t{op.last_layer} - op.first_layer + 1;
}

// A compute op's host time on a GPU worker: its kind's fixed_s + layers ·
// per_layer_s (DeviceSpec::host_per_op); 0 for an op host_kind leaves out.
inline double op_host_s(const DeviceSpec::HostPerOp& host, const Op& op) {
  const HostKind kind = host_kind(op.kind);
  if (kind == HostKind::kNone) return 0;
  const DeviceSpec::HostTime& time =
      kind == HostKind::kForward ? host.forward : (kind == HostKind::kBackward ? host.backward : host.update);
  return time.seconds(layers_spanned(op));
}

// The most ops a plan may hold (docs/simulator.md "Limits"): the simulator
// times that many in a few seconds, and the plan and the run hold them in
// under 1 GB (about 150 and 85 bytes an op).
inline constexpr int64_t kMaxPlanOps = 4'000'000;
// The most iterations a plan trains: beyond it all but the smallest plans
// pass kMaxPlanOps anyway (generate_plan rejects more, naming --iterations).
inline constexpr int32_t kMaxPlanIterations = 100'000;

// Generators call it before writing a plan of at least `ops` ops (as a double,
// so absurd settings do not overflow): InputError "<strategy> plan: would
// hold at least N ops (<why>)" with `reduce` (what to lower) when over the limit.
void check_plan_ops(const std::string& strategy, double ops, const std::string& why, const std::string& reduce);

// Appends ops and keeps `streams` in step; generators build plans with it.
// Past kMaxPlanOps ops it throws InputError (the estimates before a plan is
// written catch the common cases with a better message).
class PlanBuilder {
 public:
  PlanBuilder(std::string strategy, int32_t workers, int32_t iterations, double samples_per_iteration);

  // Adds `op` at the end of its worker's stream; returns its id.
  OpId add(Op op);
  // A group of workers for collectives; returns its index (equal groups share one).
  int32_t group(std::vector<int32_t> members);
  PlanWorker& worker(int32_t w) { return plan_.workers[w]; }
  Op& op(OpId id) { return plan_.ops[id]; }
  void set_config(nlohmann::json config) { plan_.config = std::move(config); }
  void set_iteration_period(int32_t period) { plan_.iteration_period = period; }
  void set_drain_iterations(int64_t drain) { plan_.drain_iterations = drain; }
  void add_server(PlanServer server) { plan_.servers.push_back(server); }
  void set_gathers_sparse_rows(bool gathers) { plan_.gathers_sparse_rows = gathers; }

  // Validates (see validate_plan) and returns the plan.
  Plan build() &&;

 private:
  Plan plan_;
};

// Checks ids, workers, streams, groups, Send/Recv pairing, and that the ops
// can all run (no cycle through deps and stream order); throws std::logic_error
// naming the first broken op — a broken plan is a generator bug.
void validate_plan(const Plan& plan);

// `trainsim simulate --dump-plan`: workers, groups and every op with its fields.
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace trainsim
