// The discrete-event engine's setup: options checked, the plan read once
// into packed op states and successor lists, collectives matched across
// their members and priced (see engine_state.hpp).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/des/clock.hpp"
#include "sim/des/engine_state.hpp"

namespace trainsim::des_detail {
namespace {

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

}  // namespace

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
  const double collective_rate = cluster.device.collective_rate_while_computing;
  sharing_ = shared_rate_ < 1 || (collective_rate > 0 && collective_rate < 1);
  handoff_ns_ = duration_ns(cluster.device.handoff_s, -1);
  core_shares_.assign(workers, CoreShare{});
  if (cluster.shared_devices > 0) {  // virtual workers: a worker's device on its machine's physical device
    core_jobs_.assign(static_cast<size_t>(cluster.machines * cluster.shared_devices), {});
    core_clocks_.assign(core_jobs_.size(), CoreClock{});
    for (int32_t w = 0; w < workers; ++w) {
      core_of_worker_.push_back(
          static_cast<int32_t>(physical_device_of(cluster, device_of_worker_[static_cast<size_t>(w)])));
    }
  } else if (cluster.shared_cores > 0) {
    core_scheduling_ = true;
    core_jobs_.assign(static_cast<size_t>(std::min<int64_t>(cluster.shared_cores, workers)), {});
    core_clocks_.assign(core_jobs_.size(), CoreClock{});
    for (int32_t w = 0; w < workers; ++w) {
      core_of_worker_.push_back(static_cast<int32_t>(w % static_cast<int64_t>(core_jobs_.size())));
    }
    release_version_.assign(op_count_, 0);
    hop_slot_.assign(op_count_, -1);
    workers_on_core_.assign(core_jobs_.size(), 0);
    for (const int32_t core : core_of_worker_) ++workers_on_core_[core];
    pollers_.assign(core_jobs_.size(), {});
    core_owner_.assign(core_jobs_.size(), -1);
    queued_compute_.assign(core_jobs_.size(), {});
  }
  running_collectives_.assign(workers, {});
  result_.warmup_iterations = resolve_warmup_iterations(options.warmup_iterations, plan.iterations);
  result_.seed = options.seed;
  const auto groups = static_cast<int32_t>(plan.groups.size());
  issued_offsets_.assign(groups + 1, 0);
  for (int32_t g = 0; g < groups; ++g) {
    issued_offsets_[g + 1] = issued_offsets_[g] + kCollectiveKinds * static_cast<int32_t>(plan.groups[g].size());
  }
  issued_.assign(issued_offsets_[groups], 0);
  instances_.assign(kCollectiveKinds * static_cast<size_t>(groups), {});
  read_ops();
  price_host();
  if (core_scheduling_) hop_members_.assign(collective_ops_.size(), HopMember{});
  price_collectives();
  live_bytes_.assign(workers, 0.0);
  peak_live_bytes_.assign(workers, 0.0);
  // Written as ops start, become ready and end (after read_ops, so its scratch is gone).
  result_.timings.resize(op_count_);
  if (!collectives_.empty()) record_.collective_ready_ns = std::make_unique_for_overwrite<SimTime[]>(op_count_);
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
  std::vector<OpId> dep_of(2 * static_cast<size_t>(op_count_));  // (dep, op) pairs, flattened, so the fill
  size_t dep_pairs_end = 0;                                      // does not reread the plan
  for (OpId id = 0; id < op_count_; ++id) {
    const Op& op = plan_.ops[id];
    TRAINSIM_CHECK(op.iteration >= 0 && op.iteration < std::max(plan_.iterations, 1),
                   plan_.strategy + " plan: an op's iteration is outside 0..iterations-1");
    OpState& state = states_.emplace_back();
    state.amount = is_transfer(op.kind) ? op.bytes : op.work_s;
    state.worker = op.worker;
    state.kind = op.kind;
    if (op.alloc_bytes != 0 || op.free_bytes != 0) {
      state.memory = static_cast<int32_t>(memory_bytes_.size());
      memory_bytes_.push_back({op.alloc_bytes, op.free_bytes});
    }
    has_work_ |= op.work_s > 0 || op.bytes > 0;
    state.pending = static_cast<int32_t>(op.deps.size()) + has_stream_predecessor[id];
    if (stream_next[id] >= 0) ++successor_offsets_[id + 1];
    const size_t end = dep_pairs_end + 2 * op.deps.size();
    if (end > dep_of.size()) dep_of.resize(std::max(end, 2 * dep_of.size()));
    OpId* pair = dep_of.data() + dep_pairs_end;
    for (OpId dep : op.deps) {
      ++successor_offsets_[dep + 1];
      *pair++ = dep;
      *pair++ = id;
    }
    dep_pairs_end = end;
    record_.kinds[id] = op.kind;
    record_.iterations[id] = op.iteration;
    if (state.pending == 0) initially_ready_.push_back(id);
    if (is_collective(op.kind)) add_collective_member(id, op);
    if (is_transfer(op.kind)) {
      state.target = op.kind == OpKind::kSend ? device_of_worker_[op.peer] : op.kind == OpKind::kCopyToHost;
    }
  }
  dep_of.resize(dep_pairs_end);
  fill_successors(stream_next, dep_of);
  // A recv on another worker than its send's is released the link's latency
  // after the send ends (LogP's L: in flight, not on the send's stream).
  handed_off_by_.assign(op_count_, -1);
  for (size_t i = 0; i < dep_of.size(); i += 2) {
    const Op& dep = plan_.ops[dep_of[i]];
    const Op& op = plan_.ops[dep_of[i + 1]];
    if (dep.kind == OpKind::kSend && op.kind == OpKind::kRecv && dep.worker != op.worker) {
      handed_off_by_[dep_of[i + 1]] = dep_of[i];
    }
  }
  // A compute op that releases another stream of its own worker hands that
  // op over (the executor's compute thread yields its core to it) and its
  // stream resumes handoff_s later.
  if (handoff_ns_ <= 0) return;
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
  const int kind = op.kind == OpKind::kAllReduce       ? 0
                   : op.kind == OpKind::kBroadcast     ? 1
                   : op.kind == OpKind::kReduceScatter ? 3
                   : op.kind == OpKind::kAllGather     ? 4
                                                       : 2;
  const auto member =
      static_cast<int32_t>(std::lower_bound(members.begin(), members.end(), op.worker) - members.begin());
  const int32_t k = issued_[issued_offsets_[op.group] + kCollectiveKinds * member + kind]++;
  std::vector<int32_t>& list = instances_[kCollectiveKinds * static_cast<size_t>(op.group) + kind];
  if (k == static_cast<int32_t>(list.size())) {
    list.push_back(static_cast<int32_t>(collectives_.size()));
    Collective c;
    c.first_slot = static_cast<int32_t>(collective_ops_.size());
    c.members = static_cast<int32_t>(members.size());
    c.kind = op.kind;
    c.algorithm = op.algorithm;
    c.codec = op.codec;
    c.bytes = op.bytes;
    c.repeat = op.repeat;
    c.machine = machine_of_worker_[op.worker];
    collectives_.push_back(c);
    collective_ops_.resize(collective_ops_.size() + members.size(), -1);
  }
  Collective& c = collectives_[list[k]];
  TRAINSIM_CHECK(op.bytes == c.bytes && op.algorithm == c.algorithm && op.repeat == c.repeat,
                 plan_.strategy + " plan: op " + std::to_string(id) + " disagrees with the other members of its " +
                     op_kind_name(op.kind) + " on bytes or algorithm");
  c.crosses_machines |= machine_of_worker_[op.worker] != c.machine;
  ++c.issued;
  states_[id].index = list[k];
  collective_ops_[c.first_slot + member] = id;
  if (!hop_slot_.empty()) hop_slot_[id] = c.first_slot + member;
}

// Where the machines share one computer's cores: the cores the kernel keeps
// busy moving a collective's bytes between machines while it runs. Each
// machine's link carries them for the algorithm's β time (its bytes at the
// link's bandwidth), so the links move machines · bandwidth bytes per second
// for that part of the collective's `duration_s`, each byte costing
// link_kernel_s_per_byte of core time (docs/simulator.md).
double Engine::links_kernel_cores(const Collective& c, const LinkParams& link, double duration_s) {
  if (!core_scheduling_ || cluster_.link_kernel_s_per_byte <= 0 || link.beta_s_per_byte <= 0) return 0;
  const double wire_s = c.link_bytes * link.beta_s_per_byte;
  const auto spanned = static_cast<double>(machines_of(c).size());
  const double busy = std::min(1.0, wire_s / duration_s);
  return cluster_.link_kernel_s_per_byte * spanned * busy / link.beta_s_per_byte;
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
    const LinkParams link = collective_link_for(cluster_, c.crosses_machines, c.algorithm);
    // The packing copies the float32 gradient, whatever the wire carries
    // (the executor's all_reduce flattens and unflattens it whole).
    const double packed_bytes = c.codec != Codec::kNone ? c.bytes / wire_fraction(codec_name(c.codec)) : c.bytes;
    const double call_s =
        collective_call_overhead_s(cluster_, packed_bytes / c.repeat, c.members, c.algorithm, c.crosses_machines);
    const double pack_s = call_s - cluster_.collective.sync_s;
    // A barrier: one global synchronization, t_sync (docs/equations.md §2).
    double duration_s = barrier_s(c.members, cluster_.collective.sync_s);
    double cores_s = 0;  // the part the workers' cores do: reductions (γ), packing, the codec
    if (c.kind == OpKind::kAllReduce) {
      // docs/equations.md §2: the algorithm's α-β-γ time, plus the per-call t_sync (and packing) the cost models add.
      // Standing for `repeat` back to back: each of bytes / repeat.
      const double each = c.bytes / c.repeat, n = c.repeat;
      duration_s = n * (allreduce_s(c.algorithm, each, c.members, link) + call_s);
      cores_s = n * (allreduce_s(c.algorithm, each, c.members, {0, 0, link.gamma_s_per_byte}) + pack_s);
      if (c.codec != Codec::kNone) {  // the codec at every hop, on the float32 bytes the wire's encode
        const std::string compression = codec_name(c.codec);
        const double codec_s = ring_codec_s(cluster_, compression, c.bytes / wire_fraction(compression), c.members);
        duration_s += codec_s;
        cores_s += codec_s;
      }
    } else if (c.kind == OpKind::kReduceScatter || c.kind == OpKind::kAllGather) {
      // A ring's half of an AllReduce (docs/equations.md §2): (n − 1) steps of
      // bytes/n, the reduce-scatter reducing as it goes; `repeat` of them.
      const double each = c.bytes / c.repeat, n = c.repeat;
      const double gamma = c.kind == OpKind::kReduceScatter ? link.gamma_s_per_byte : 0.0;
      duration_s = n * (allreduce_s(CollectiveAlgorithm::kRing, each, c.members,
                                    {link.alpha_s, link.beta_s_per_byte, 2 * gamma}) /
                            2 +
                        call_s);
      cores_s = n * (allreduce_s(CollectiveAlgorithm::kRing, each, c.members, {0, 0, 2 * gamma}) / 2 + pack_s);
    } else if (c.kind == OpKind::kBroadcast) {
      // docs/equations.md §2, broadcast/binomial tree: ⌈lg p⌉(α + nβ), plus t_sync.
      duration_s = broadcast_tree_s(c.bytes, c.members, link) + call_s;
      cores_s = pack_s;
    }
    c.duration_ns = duration_ns(duration_s, collective_ops_[c.first_slot]);
    // Within a machine all of a collective is the cores' work; across
    // machines its links' time goes on at full rate beside compute.
    const double on_cores = !c.crosses_machines ? 1.0
                            : duration_s > 0    ? std::clamp(cores_s / duration_s, 0.0, 1.0)
                                                : 0.0;
    const double measured = cluster_.device.collective_rate_while_computing;
    c.compute_rate = 1 / (on_cores / shared_rate_ + (1 - on_cores));
    c.shared_rate = measured > 0 ? 1 / (on_cores / measured + (1 - on_cores)) : c.compute_rate;
    if (c.crosses_machines) {
      const LinkParams bytes{0, 1, 0};  // β = 1 s per byte: the α-β-γ time is the bytes each link carries
      c.link_bytes = c.kind == OpKind::kAllReduce   ? allreduce_s(c.algorithm, c.bytes, c.members, bytes)
                     : c.kind == OpKind::kBroadcast ? broadcast_tree_s(c.bytes, c.members, bytes)
                     : c.kind == OpKind::kReduceScatter || c.kind == OpKind::kAllGather
                         ? allreduce_s(CollectiveAlgorithm::kRing, c.bytes, c.members, bytes) / 2
                         : 0.0;
      if (duration_s > 0) c.kernel_cores = links_kernel_cores(c, link, duration_s);
      c.link_ns_per_byte = link.beta_s_per_byte * kNsPerS;
      if (core_scheduling_ && c.kind == OpKind::kAllReduce && c.algorithm == CollectiveAlgorithm::kRing) {
        plan_hops(c, pack_s);
      }
    }
  }
}

}  // namespace trainsim::des_detail
