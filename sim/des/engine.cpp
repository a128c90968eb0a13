// The discrete-event engine: the event loop, collectives, and transfers as
// flows over shared ports. Time is integer nanoseconds; events are small PODs
// in a binary heap ordered by (time, sequence), so ties run in push order and
// a run repeats exactly. Per-op buffers are sized before the loop; in it
// only the event heap, the flow slots and the ports' lists grow, to what is
// in flight at once.
#include "sim/des/engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/collective.hpp"
#include "sim/des/clock.hpp"
#include "sim/des/flows.hpp"
#include "sim/des/summary.hpp"

namespace trainsim {
namespace {

enum EventKind : uint32_t {
  kOpEnd = 0,     // a compute op, recv or collective ends
  kFlowJoin = 1,  // a transfer's latency has passed: it starts moving bytes
  kFlowDone = 2,  // a transfer's predicted completion (stale if its version moved on)
  kHandedOff = 3, // a compute stream is back from handing an op over: its next op may start
};

struct Event {
  SimTime time_ns;
  uint64_t sequence;
  OpId op;
  uint32_t tag;  // EventKind in the low 2 bits, the flow's version above
};

// std heap functions build a max-heap: "less" means later, so the earliest
// (time, sequence) is on top.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.sequence > b.sequence;
  }
};

// What the event loop reads and writes of one op, in half a cache line (the
// loop visits ops in time order, not id order, so size is misses). Its times
// go straight into the result and the run record, written once each.
struct OpState {
  double work_s = 0;
  int32_t worker = 0;
  int32_t index = -1;          // transfers: their TransferSpec, then their flow while they run;
                               // collectives: their Collective; else -1
  int32_t pending = 0;         // deps + stream predecessor not yet ended
  int32_t memory = -1;         // allocates or frees: its entry in Engine::memory_bytes_, else -1
  uint32_t version = 0;        // compute ops: bumped when a rate change reschedules its end
  OpKind kind = OpKind::kForward;
  bool hands_off = false;      // a compute op another stream of its worker waits on, with a stream
                               // successor: that successor is released DeviceSpec::handoff_s later
};
static_assert(sizeof(OpState) == 32, "two op states per cache line");

// What a transfer op's flow needs of the plan, packed so opening it does
// not read the plan's op (a cache miss in time order).
struct TransferSpec {
  double bytes = 0;
  int32_t target = 0;  // kSend: the peer's device; kCopyToHost: 1, kCopyToDevice: 0; kHostAccumulate: unused
  OpKind kind = OpKind::kSend;
};

// A worker's compute op while its communication shares the cores
// (DeviceSpec::compute_rate_while_communicating < 1): the op's work left at
// `since_ns`, in nanoseconds at full rate, and how many of the worker's
// communication ops are in flight.
struct CoreShare {
  OpId running = -1;
  double remaining_ns = 0;
  SimTime since_ns = 0;
  int32_t communicating = 0;
};

// Communication that runs on the worker's own cores when the device has no
// copy engines: collectives (reductions and copies into messages), copies to
// and from the host, and host accumulation. Point-to-point sends hand their
// buffer over and are left out.
bool uses_worker_cores(OpKind kind) {
  return kind == OpKind::kAllReduce || kind == OpKind::kBroadcast || kind == OpKind::kCopyToHost ||
         kind == OpKind::kCopyToDevice || kind == OpKind::kHostAccumulate;
}

// Ops that run jointly: one per member of a group, matched by the order in
// which each member issues collectives of that kind on that group.
struct Collective {
  int32_t first_slot = 0;  // into Engine::collective_ops_, one slot per member
  int32_t members = 0;
  int32_t issued = 0;      // members whose op the plan lists
  int32_t ready = 0;       // members whose op is ready
  OpKind kind = OpKind::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  double bytes = 0;
  int32_t machine = 0;     // of the first member listed
  bool crosses_machines = false;
  SimTime duration_ns = 0;
};

void check_options(const SimOptions& o) {
  const std::string expected =
      "PROB:SLOWDOWN with 0 <= PROB <= 1 and 1 <= SLOWDOWN <= " + format_number(kMaxStragglerSlowdown);
  if (!(o.straggler_probability >= 0 && o.straggler_probability <= 1)) {
    throw InputError("--straggler", "probability " + format_number(o.straggler_probability), expected);
  }
  if (!(o.straggler_slowdown >= 1 && o.straggler_slowdown <= kMaxStragglerSlowdown)) {
    throw InputError("--straggler", "slowdown " + format_number(o.straggler_slowdown), expected);
  }
  if (!(o.jitter >= 0) || !std::isfinite(o.jitter)) {
    throw InputError("--jitter", "is " + std::to_string(o.jitter), "a relative standard deviation >= 0");
  }
}

class Engine {
 public:
  Engine(const Plan& plan, const Cluster& cluster, const SimOptions& options);
  SimResult run();

 private:
  void read_ops();
  void fill_successors(const std::vector<OpId>& stream_next, const std::vector<OpId>& dep_of);
  void add_collective_member(OpId id, const Op& op);
  void price_collectives();
  int32_t open_flow(OpId id);

  void push(SimTime time_ns, OpId op, uint32_t tag);
  Event pop();
  void on_ready(OpId id);
  void start(OpId id);
  void finish(OpId id);
  void release(OpId next, OpId by);
  SimTime compute_duration_ns(OpId id);
  void start_compute(OpId id);
  void set_communicating(int32_t worker, int32_t delta);
  void reschedule_compute(CoreShare& share);
  double draw_uniform();
  void push_completions();

  const Plan& plan_;
  const Cluster& cluster_;
  const SimOptions options_;
  const int32_t op_count_;
  std::mt19937_64 rng_;
  double jitter_mu_ = 0;     // lognormal parameters of a mean-1 factor with relative sd `jitter`
  double jitter_sigma_ = 0;

  std::vector<OpState> states_;
  std::vector<std::array<double, 2>> memory_bytes_;  // per op that has any: alloc at start, free at end
  std::vector<TransferSpec> transfers_;              // per transfer op
  std::vector<OpId> initially_ready_;                // ops with no deps and no stream predecessor
  std::vector<int32_t> successor_offsets_;  // op i's successors: successors_[offsets[i], offsets[i + 1])
  std::vector<OpId> successors_;            // stream successors and reverse deps, grouped by op
  std::vector<int32_t> machine_of_worker_;
  std::vector<int32_t> device_of_worker_;
  double shared_rate_ = 1;              // cluster's compute_rate_while_communicating
  SimTime handoff_ns_ = 0;              // cluster's handoff_s
  std::vector<OpId> handed_off_by_;     // per op released after a hand-off: its stream predecessor, else -1
  std::vector<CoreShare> core_shares_;  // per worker, used when shared_rate_ < 1

  std::vector<Collective> collectives_;
  std::vector<OpId> collective_ops_;
  std::vector<int32_t> issued_offsets_;             // per group: where its (member, kind) counters start
  std::vector<int32_t> issued_;                     // collectives each (group, member, kind) issued so far
  std::vector<std::vector<int32_t>> instances_;     // (group, kind) -> k -> collective

  FlowNetwork flows_;
  std::vector<FlowCompletion> completions_;  // reused buffer of the flows' reschedules

  std::vector<Event> heap_;
  // Events due at the current time (a receive ending with its send, a
  // collective of no duration): in push order, which is their (time,
  // sequence) order, so they skip the heap and are taken before its top
  // whenever they come first.
  std::vector<Event> due_now_;
  size_t due_now_next_ = 0;
  uint64_t sequence_ = 0;
  SimTime now_ns_ = 0;
  int64_t finished_ = 0;
  bool has_work_ = false;                   // some op computes or moves bytes
  std::vector<double> live_bytes_;          // per worker: allocations not yet freed
  std::vector<double> peak_live_bytes_;
  RunRecord record_;
  SimResult result_;
};

Engine::Engine(const Plan& plan, const Cluster& cluster, const SimOptions& options)
    : plan_(plan),
      cluster_(cluster),
      options_(options),
      op_count_(static_cast<int32_t>(plan.ops.size())),
      rng_(options.seed),
      flows_(cluster, plan.strategy + " plan") {
  check_options(options);
  if (plan.drain_iterations > 0 && plan.iterations - plan.drain_iterations < 2) {
    throw InputError("--iterations",
                     "is " + std::to_string(plan.iterations) + ": the " + plan.strategy + " plan's drain holds its last " +
                         std::to_string(plan.drain_iterations) + ", leaving no steady state",
                     "at least " + std::to_string(std::min<int64_t>(plan.drain_iterations, INT64_MAX - 2) + 2) +
                         " iterations, or a smaller width");
  }
  if (options.jitter > 0) {
    // ln X ~ N(mu, sigma²) has mean exp(mu + sigma²/2) = 1 and relative sd
    // sqrt(exp(sigma²) - 1) = jitter.
    jitter_sigma_ = std::sqrt(std::log1p(options.jitter * options.jitter));
    jitter_mu_ = -0.5 * jitter_sigma_ * jitter_sigma_;
  }
  const auto workers = static_cast<int32_t>(plan.workers.size());
  const int64_t devices = device_count(cluster);
  for (int32_t w = 0; w < workers; ++w) {
    const int32_t device = plan.workers[w].device;
    if (device < 0 || device >= devices) {
      throw InputError("cluster " + cluster.name,
                       "has " + std::to_string(devices) + " devices but plan worker " + std::to_string(w) +
                           " runs on device " + std::to_string(device),
                       "a cluster with a device for every worker of the " + plan.strategy + " plan");
    }
    device_of_worker_.push_back(device);
    machine_of_worker_.push_back(static_cast<int32_t>(device / cluster.devices_per_machine));
  }
  shared_rate_ = cluster.device.compute_rate_while_communicating;
  handoff_ns_ = duration_ns(cluster.device.handoff_s, -1);
  core_shares_.assign(workers, CoreShare{});
  result_.warmup_iterations = resolve_warmup_iterations(options.warmup_iterations, plan.iterations);
  result_.seed = options.seed;
  const auto groups = static_cast<int32_t>(plan.groups.size());
  issued_offsets_.assign(groups + 1, 0);
  for (int32_t g = 0; g < groups; ++g) {
    issued_offsets_[g + 1] = issued_offsets_[g] + 3 * static_cast<int32_t>(plan.groups[g].size());
  }
  issued_.assign(issued_offsets_[groups], 0);
  instances_.assign(3 * static_cast<size_t>(groups), {});
  read_ops();
  price_collectives();
  live_bytes_.assign(workers, 0.0);
  peak_live_bytes_.assign(workers, 0.0);
  // Written as ops start, become ready and end (after read_ops, so its scratch is gone).
  result_.timings.resize(op_count_);
  record_.ready_ns.resize(op_count_);
  record_.released_by.assign(op_count_, -1);
}

// One pass over the plan's ops (the only one that reads every Op): their
// packed states (written once), what the summary reads, and their deps, which
// become each op's successors (its stream successor and every op listing it
// as a dep) in one flat array. The bookkeeping lives in compact arrays, since
// every pass over the states costs a cache line per op.
void Engine::read_ops() {
  std::vector<OpId> stream_next(op_count_, -1);
  std::vector<uint8_t> has_stream_predecessor(op_count_, 0);
  for (const auto& worker : plan_.streams) {
    for (const auto& stream : worker) {
      for (size_t i = 1; i < stream.size(); ++i) {
        stream_next[stream[i - 1]] = stream[i];
        has_stream_predecessor[stream[i]] = 1;
      }
    }
  }
  states_.reserve(op_count_);
  record_.kinds.resize(op_count_);
  record_.iterations.resize(op_count_);
  successor_offsets_.assign(op_count_ + 1, 0);
  std::vector<OpId> dep_of;  // (dep, op) pairs, flattened, so the fill does not reread the plan
  dep_of.reserve(2 * static_cast<size_t>(op_count_));
  for (OpId id = 0; id < op_count_; ++id) {
    const Op& op = plan_.ops[id];
    TRAINSIM_CHECK(op.iteration >= 0 && op.iteration < std::max(plan_.iterations, 1),
                   plan_.strategy + " plan: an op's iteration is outside 0..iterations-1");
    OpState& state = states_.emplace_back();
    state.work_s = op.work_s;
    state.worker = op.worker;
    state.kind = op.kind;
    if (op.alloc_bytes != 0 || op.free_bytes != 0) {
      state.memory = static_cast<int32_t>(memory_bytes_.size());
      memory_bytes_.push_back({op.alloc_bytes, op.free_bytes});
    }
    has_work_ |= op.work_s > 0 || op.bytes > 0;
    state.pending = static_cast<int32_t>(op.deps.size()) + has_stream_predecessor[id];
    if (stream_next[id] >= 0) ++successor_offsets_[id + 1];
    for (OpId dep : op.deps) {
      ++successor_offsets_[dep + 1];
      dep_of.push_back(dep);
      dep_of.push_back(id);
    }
    record_.kinds[id] = op.kind;
    record_.iterations[id] = op.iteration;
    if (state.pending == 0) initially_ready_.push_back(id);
    if (is_collective(op.kind)) add_collective_member(id, op);
    if (op.kind == OpKind::kSend || op.kind == OpKind::kCopyToHost || op.kind == OpKind::kCopyToDevice ||
        op.kind == OpKind::kHostAccumulate) {
      state.index = static_cast<int32_t>(transfers_.size());
      const int32_t target = op.kind == OpKind::kSend ? device_of_worker_[op.peer] : op.kind == OpKind::kCopyToHost;
      transfers_.push_back({op.bytes, target, op.kind});
    }
  }
  fill_successors(stream_next, dep_of);
  // A compute op that releases another stream of its own worker hands that
  // op over (the executor's compute thread yields its core to it) and its
  // stream resumes handoff_s later.
  if (handoff_ns_ <= 0) return;
  handed_off_by_.assign(op_count_, -1);
  for (size_t i = 0; i < dep_of.size(); i += 2) {
    const Op& dep = plan_.ops[dep_of[i]];
    const Op& op = plan_.ops[dep_of[i + 1]];
    if (dep.stream == StreamKind::kCompute && op.stream != StreamKind::kCompute && dep.worker == op.worker &&
        stream_next[dep_of[i]] >= 0) {
      states_[dep_of[i]].hands_off = true;
      handed_off_by_[stream_next[dep_of[i]]] = dep_of[i];
    }
  }
}

// successor_offsets_[id + 1] holds op id's successor count: make the offsets
// cumulative and place each op's stream successor, then its reverse deps.
void Engine::fill_successors(const std::vector<OpId>& stream_next, const std::vector<OpId>& dep_of) {
  for (OpId id = 0; id < op_count_; ++id) successor_offsets_[id + 1] += successor_offsets_[id];
  successors_.assign(successor_offsets_[op_count_], 0);
  std::vector<int32_t> fill(successor_offsets_.begin(), successor_offsets_.end() - 1);
  for (OpId id = 0; id < op_count_; ++id) {
    if (stream_next[id] >= 0) successors_[fill[id]++] = stream_next[id];
  }
  for (size_t i = 0; i < dep_of.size(); i += 2) successors_[fill[dep_of[i]]++] = dep_of[i + 1];
}

// Matches the k-th collective of a kind that worker w issues on group g with
// the k-th of every other member (ops listed in id order).
void Engine::add_collective_member(OpId id, const Op& op) {
  const auto& members = plan_.groups[op.group];
  const int kind = op.kind == OpKind::kAllReduce ? 0 : op.kind == OpKind::kBroadcast ? 1 : 2;
  const auto member =
      static_cast<int32_t>(std::lower_bound(members.begin(), members.end(), op.worker) - members.begin());
  const int32_t k = issued_[issued_offsets_[op.group] + 3 * member + kind]++;
  std::vector<int32_t>& list = instances_[3 * static_cast<size_t>(op.group) + kind];
  if (k == static_cast<int32_t>(list.size())) {
    list.push_back(static_cast<int32_t>(collectives_.size()));
    Collective c;
    c.first_slot = static_cast<int32_t>(collective_ops_.size());
    c.members = static_cast<int32_t>(members.size());
    c.kind = op.kind;
    c.algorithm = op.algorithm;
    c.bytes = op.bytes;
    c.machine = machine_of_worker_[op.worker];
    collectives_.push_back(c);
    collective_ops_.resize(collective_ops_.size() + members.size(), -1);
  }
  Collective& c = collectives_[list[k]];
  TRAINSIM_CHECK(op.bytes == c.bytes && op.algorithm == c.algorithm,
                 plan_.strategy + " plan: op " + std::to_string(id) + " disagrees with the other members of its " +
                     op_kind_name(op.kind) + " on bytes or algorithm");
  c.crosses_machines |= machine_of_worker_[op.worker] != c.machine;
  ++c.issued;
  states_[id].index = list[k];
  collective_ops_[c.first_slot + member] = id;
}

// Every collective's duration, once: the α-β-γ time of its algorithm on the
// intra-machine link, or the slower link when its members span machines.
void Engine::price_collectives() {
  for (Collective& c : collectives_) {
    if (c.issued != c.members) {
      const auto slots = collective_ops_.begin() + c.first_slot;
      const OpId listed = *std::find_if(slots, slots + c.members, [](OpId id) { return id >= 0; });
      TRAINSIM_CHECK(false, plan_.strategy + " plan: the " + op_kind_name(c.kind) + " of op " + std::to_string(listed) +
                                " has no counterpart on some members of group " +
                                std::to_string(plan_.ops[listed].group));
    }
    const LinkParams link = collective_link_for(cluster_, c.crosses_machines);
    // A barrier: one global synchronization, t_sync (docs/equations.md §2).
    double duration_s = barrier_s(c.members, cluster_.collective.sync_s);
    if (c.kind == OpKind::kAllReduce) {
      // docs/equations.md §2: the algorithm's α-β-γ time, plus the per-call t_sync (and packing) the cost models add.
      duration_s = allreduce_s(c.algorithm, c.bytes, c.members, link) + collective_call_overhead_s(cluster_, c.bytes, c.members);
    } else if (c.kind == OpKind::kBroadcast) {
      // docs/equations.md §2, broadcast/binomial tree: ⌈lg p⌉(α + nβ), plus t_sync.
      duration_s = broadcast_tree_s(c.bytes, c.members, link) + collective_call_overhead_s(cluster_, c.bytes, c.members);
    }
    c.duration_ns = duration_ns(duration_s, collective_ops_[c.first_slot]);
  }
}

// A transfer op starting: its flow, on the ports of its path (flows.hpp),
// held while it runs.
int32_t Engine::open_flow(OpId id) {
  const TransferSpec& t = transfers_[states_[id].index];
  const int32_t worker = states_[id].worker;
  const int32_t device = device_of_worker_[worker];
  if (t.kind == OpKind::kSend) return flows_.add_send(id, device, t.target, t.bytes);
  if (t.kind == OpKind::kHostAccumulate) return flows_.add_host_accumulate(id, machine_of_worker_[worker], t.bytes);
  return flows_.add_copy(id, device, t.target == 1, t.bytes);
}

// Events at or after now: `time_ns` comes from later_ns, so it is on the clock.
void Engine::push(SimTime time_ns, OpId op, uint32_t tag) {
  if (time_ns == now_ns_) {
    due_now_.push_back({time_ns, sequence_++, op, tag});
    return;
  }
  heap_.push_back({time_ns, sequence_++, op, tag});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

// The earliest event by (time, sequence): the oldest one due now, or the
// heap's top when that comes first. The caller checks that one is left.
Event Engine::pop() {
  if (due_now_next_ < due_now_.size() && (heap_.empty() || Later{}(heap_.front(), due_now_[due_now_next_]))) {
    const Event event = due_now_[due_now_next_++];
    if (due_now_next_ == due_now_.size()) {
      due_now_.clear();
      due_now_next_ = 0;
    }
    return event;
  }
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Event event = heap_.back();
  heap_.pop_back();
  return event;
}

double Engine::draw_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits

// A compute op's duration: work_s, times the slowdown with probability p,
// times a mean-1 lognormal factor of relative sd `jitter`. Draws happen in
// event order, so one seed gives one run.
SimTime Engine::compute_duration_ns(OpId id) {
  double factor = 1;
  if (options_.straggler_probability > 0 && draw_uniform() < options_.straggler_probability) {
    factor *= options_.straggler_slowdown;
  }
  if (options_.jitter > 0) {
    // Box-Muller: one standard normal from two uniforms (1 - u keeps the log finite).
    const double u1 = 1.0 - draw_uniform();
    const double u2 = draw_uniform();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    factor *= std::exp(jitter_mu_ + jitter_sigma_ * z);
  }
  return duration_ns(states_[id].work_s * factor, id);
}

// Every dep and the stream predecessor of `id` have ended: start it (or, for
// a collective, count it ready and start all members once the last is).
void Engine::on_ready(OpId id) {
  OpState& op = states_[id];
  record_.ready_ns[id] = now_ns_;
  if (is_compute(op.kind)) {
    start_compute(id);
  } else if (op.kind == OpKind::kRecv) {
    start(id);  // the bytes moved with the Send it depends on
    push(now_ns_, id, kOpEnd);
  } else if (is_collective(op.kind)) {
    Collective& c = collectives_[op.index];
    if (++c.ready < c.members) return;
    for (int32_t m = 0; m < c.members; ++m) {
      const OpId member = collective_ops_[c.first_slot + m];
      start(member);
      push(later_ns(now_ns_, c.duration_ns, member), member, kOpEnd);
    }
  } else {
    op.index = open_flow(id);
    start(id);
    push(later_ns(now_ns_, flows_.latency_ns(op.index), id), id, kFlowJoin);
  }
}

// A compute op runs at full rate, or at the shared rate while its worker
// communicates on the same cores: processor sharing, so its end moves
// whenever that changes (reschedule_compute).
void Engine::start_compute(OpId id) {
  start(id);
  const SimTime duration = compute_duration_ns(id);
  if (shared_rate_ >= 1) {
    push(later_ns(now_ns_, duration, id), id, kOpEnd);
    return;
  }
  CoreShare& share = core_shares_[states_[id].worker];
  share.running = id;
  share.remaining_ns = static_cast<double>(duration);
  share.since_ns = now_ns_;
  reschedule_compute(share);
}

void Engine::reschedule_compute(CoreShare& share) {
  OpState& op = states_[share.running];
  const double rate = share.communicating > 0 ? shared_rate_ : 1.0;
  ++op.version;
  const SimTime left_ns = to_clock_ns(std::ceil(share.remaining_ns / rate), share.running);
  push(later_ns(share.since_ns, left_ns, share.running), share.running, kOpEnd | (op.version << 2));
}

// A communication op of `worker` starts (+1) or ends (−1); when that turns
// sharing on or off, its running compute op banks the work done at the old
// rate and has its end moved.
void Engine::set_communicating(int32_t worker, int32_t delta) {
  CoreShare& share = core_shares_[worker];
  const bool was = share.communicating > 0;
  share.communicating += delta;
  if (was == (share.communicating > 0) || share.running < 0) return;
  const double old_rate = was ? shared_rate_ : 1.0;
  share.remaining_ns = std::max(0.0, share.remaining_ns - old_rate * static_cast<double>(now_ns_ - share.since_ns));
  share.since_ns = now_ns_;
  reschedule_compute(share);
}

void Engine::start(OpId id) {
  const OpState& op = states_[id];
  result_.timings[id].start_ns = now_ns_;
  if (shared_rate_ < 1 && uses_worker_cores(op.kind)) set_communicating(op.worker, +1);
  // Its successors are touched when it ends, after other events: fetch their
  // states now so that end does not wait on memory.
  for (int32_t s = successor_offsets_[id]; s < successor_offsets_[id + 1]; ++s) {
    __builtin_prefetch(&states_[successors_[s]], 1);
  }
  if (op.memory < 0) return;
  double& live = live_bytes_[op.worker];
  live += memory_bytes_[op.memory][0];
  peak_live_bytes_[op.worker] = std::max(peak_live_bytes_[op.worker], live);
}

void Engine::finish(OpId id) {
  const OpState& op = states_[id];
  result_.timings[id].end_ns = now_ns_;
  if (shared_rate_ < 1) {
    if (uses_worker_cores(op.kind)) set_communicating(op.worker, -1);
    if (core_shares_[op.worker].running == id) core_shares_[op.worker].running = -1;
  }
  if (op.memory >= 0) live_bytes_[op.worker] -= memory_bytes_[op.memory][1];
  ++finished_;
  int32_t s = successor_offsets_[id];
  if (op.hands_off) push(later_ns(now_ns_, handoff_ns_, id), successors_[s++], kHandedOff);  // its stream successor
  for (; s < successor_offsets_[id + 1]; ++s) release(successors_[s], id);
}

void Engine::release(OpId next, OpId by) {
  OpState& successor = states_[next];
  if (--successor.pending == 0) {
    record_.released_by[next] = by;
    on_ready(next);
  }
}

void Engine::push_completions() {
  for (const FlowCompletion& c : completions_) push(c.time_ns, flows_.op(c.flow), kFlowDone | (c.version << 2));
  completions_.clear();
}

SimResult Engine::run() {
  for (OpId id : initially_ready_) on_ready(id);
  int64_t events = 0;
  while (!heap_.empty() || due_now_next_ < due_now_.size()) {
    const Event event = pop();
    ++events;
    now_ns_ = event.time_ns;
    switch (event.tag & 3u) {
      case kOpEnd:
        if ((event.tag >> 2) != states_[event.op].version) break;  // a compute op rescheduled since
        finish(event.op);
        break;
      case kFlowJoin:
        if (flows_.join(states_[event.op].index, now_ns_, completions_)) {
          push_completions();
        } else {
          finish(event.op);  // nothing to move
        }
        break;
      case kHandedOff:
        release(event.op, handed_off_by_[event.op]);
        break;
      case kFlowDone: {
        const int32_t f = states_[event.op].index;
        if (!flows_.is_current(f, event.tag >> 2)) break;  // rescheduled since
        flows_.leave(f, now_ns_, completions_);
        push_completions();
        finish(event.op);
        break;
      }
      default:
        TRAINSIM_CHECK(false, "unknown event kind");
    }
  }
  if (finished_ != op_count_) {
    // validate_plan rules out cycles, so the members of some collective issued
    // their collectives in orders that wait on each other.
    const auto stuck = std::find_if(collectives_.begin(), collectives_.end(),
                                    [](const Collective& c) { return c.ready < c.members; });
    const OpId id = stuck != collectives_.end() ? collective_ops_[stuck->first_slot] : 0;
    TRAINSIM_CHECK(false, plan_.strategy + " plan: the collective of op " + std::to_string(id) + " (" +
                              op_kind_name(plan_.ops[id].kind) + ") never gathers all members");
  }
  result_.events = events;
  states_ = {};  // the summary reads the result and the record only
  result_.workers.assign(plan_.workers.size(), WorkerResult{});
  for (size_t w = 0; w < plan_.workers.size(); ++w) {
    result_.workers[w].peak_memory_bytes = plan_.workers[w].static_bytes + peak_live_bytes_[w];
  }
  summarize_simulation(plan_, record_, result_);
  if (has_work_ && plan_.iterations > 0 && !(result_.iteration_s > 0)) {
    throw InputError(plan_.strategy + " simulation", "an iteration takes under 1 ns, the resolution of its clock",
                     "a profile whose layers take nanoseconds or more");
  }
  return std::move(result_);
}

}  // namespace

SimResult simulate_plan(const Plan& plan, const Cluster& cluster, const SimOptions& options) {
  try {
    return Engine(plan, cluster, options).run();
  } catch (const ClockOverflow& overflow) {
    std::string op = "the run";
    if (overflow.op >= 0 && overflow.op < static_cast<OpId>(plan.ops.size())) {
      const Op& o = plan.ops[overflow.op];
      op = "op " + std::to_string(overflow.op) + " (" + op_kind_name(o.kind) + ", worker " +
           std::to_string(o.worker) + ", iteration " + std::to_string(o.iteration) + ")";
    }
    throw InputError(plan.strategy + " simulation",
                     op + " ends after " + format_seconds(overflow.seconds) +
                         ", past the simulator's clock (2^63 ns, about 292 years)",
                     "a shorter run: fewer --iterations, a smaller batch or --straggler slowdown, or a faster cluster");
  }
}

}  // namespace trainsim
