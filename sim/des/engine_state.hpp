// The discrete-event engine's state, shared by its two files: engine.cpp
// (the event loop, compute, transfers and collectives as they run) and
// engine_setup.cpp (reading the plan once: packed op states, successors,
// collectives matched and priced). Internal to sim/des.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "sim/des/engine.hpp"
#include "sim/des/event_queue.hpp"
#include "sim/des/flows.hpp"
#include "sim/des/summary.hpp"

namespace trainsim::des_detail {

enum EventKind : uint32_t {
  kOpEnd = 0,      // a compute op, recv or collective ends
  kFlowJoin = 1,   // a transfer's latency has passed: it starts moving bytes
  kFlowDone = 2,   // a transfer's predicted completion (stale if its version moved on)
  kHandedOff = 3,  // a compute stream is back from handing an op over, or a send's message has
                   // crossed its link's latency: the op released then may start; with
                   // kHopArrival in its version, a ring hop's chunk reaches its member (ring_hops.cpp)
};

// In a kHandedOff event's version: a ring hop's arrival, not a release (the
// release versions it is kept apart from count a core's reschedules of one op).
inline constexpr uint32_t kHopArrival = 1u << 28;
inline constexpr uint32_t kCoreCheck = 1u << 26;  // a compute op ended: who has its core (shared_cores.cpp)
inline constexpr uint32_t kHostDone = 1u << 25;   // a compute op's host part ended (host_time.cpp)

// What the event loop reads and writes of one op, in half a cache line (the
// loop visits ops in time order, not id order, so size is misses). Its times
// go straight into the result and the run record, written once each. A
// transfer keeps what its flow needs here too, so opening the flow reads
// nothing more.
struct OpState {
  double amount = 0;           // compute ops: their work in seconds; transfers: their bytes
  int32_t worker = 0;
  int32_t index = -1;          // transfers: their flow while they run; collectives: their Collective; else -1
  int32_t pending = 0;         // deps + stream predecessor not yet ended
  int32_t memory = -1;         // allocates or frees: its entry in Engine::memory_bytes_, else -1
  union {
    uint32_t version = 0;      // compute ops and collectives: bumped when a rate change reschedules its end
    int32_t target;            // transfers (never rescheduled): kSend: the peer's device; copies: 1 to the host, 0 to the device
  };
  OpKind kind = OpKind::kForward;
  bool hands_off = false;      // a compute op another stream of its worker waits on, with a stream
                               // successor: that successor is released DeviceSpec::handoff_s later
  bool posted = false;         // a send whose flow has released its own worker's ops after it (its
                               // stream successor, a barrier) before it ends (LinkSpec::send_buffer_bytes)
};
static_assert(sizeof(OpState) == 32, "two op states per cache line");

inline bool is_transfer(OpKind kind) {
  return kind == OpKind::kSend || kind == OpKind::kCopyToHost || kind == OpKind::kCopyToDevice ||
         kind == OpKind::kHostAccumulate;
}

// A worker's compute op while its communication shares the cores
// (DeviceSpec::compute_rate_while_communicating < 1): the op's work left at
// `since_ns`, in nanoseconds at full rate, and the rates at which each of
// the worker's communication ops in flight lets it run (a collective's
// compute_rate, else the device's); the slowest applies.
struct CoreShare {
  OpId running = -1;
  double remaining_ns = 0;
  SimTime since_ns = 0;
  std::vector<double> communicating;

  double rate() const {
    double r = 1;
    for (const double c : communicating) r = std::min(r, c);
    return r;
  }
};

// The least of a shared core the links' kernel work leaves its jobs: where
// the kernel would need more, the links would slow instead (not modelled).
inline constexpr double kMinKernelShare = 0.05;

// Work on a core that workers share (Cluster::shared_cores): a compute op,
// or the core time after which it releases `op` (a hand-off: the op's
// stream predecessor handed it over; a message: the send `by` delivered
// it). The core's jobs share it equally (processor sharing), each at
// `rate` times that share (a compute op: the rate its worker's
// communication leaves it, CoreShare::rate; else 1). The core keeps a
// virtual clock, the work a job of rate 1 has done there (CoreClock), so a
// job ends when that clock reaches `finish_v` and only the next job to end
// has an event.
struct CoreJob {
  static constexpr OpId kCompute = -1;   // `by` of a compute op, ended by kOpEnd
  static constexpr OpId kHopPiece = -2;  // `by` of a ring hop's piece of a collective op (ring_hops.cpp)
  OpId op = -1;
  OpId by = kCompute;  // else the op releasing `op` by kHandedOff, or kHopPiece
  double finish_v = 0;
  double rate = 1;
};

// Work a polling thread waits to do on a shared core until its compute lets
// it in (shared_cores.cpp): a ring member's next piece (`by` kHopPiece), or
// a message's latency of `work_ns` before it releases `op`.
struct Poller {
  OpId op = -1;
  OpId by = CoreJob::kHopPiece;
  double work_ns = 0;
};

// A shared core's virtual clock: `v` as of `since_ns`, moving at `share`
// (what the links' kernel work leaves of the core over its job count), and
// the job whose end event is pending (-1: none), its `by` and that
// event's time.
struct CoreClock {
  double v = 0;
  SimTime since_ns = 0;
  double share = 0;
  OpId next = -1;
  OpId next_by = CoreJob::kCompute;
  SimTime next_ns = 0;
};

// Communication that runs on the worker's own cores when the device has no
// copy engines: collectives (reductions and copies into messages), copies to
// and from the host, and host accumulation. Point-to-point sends hand their
// buffer over and are left out.
inline bool uses_worker_cores(OpKind kind) {
  return kind == OpKind::kAllReduce || kind == OpKind::kBroadcast || kind == OpKind::kReduceScatter ||
         kind == OpKind::kAllGather || kind == OpKind::kCopyToHost || kind == OpKind::kCopyToDevice ||
         kind == OpKind::kHostAccumulate;
}

// Ops that run jointly: one per member of a group, matched by the order in
// which each member issues collectives of that kind on that group.
// The kinds of collective the engine matches members of (index of
// add_collective_member): AllReduce, broadcast, barrier, reduce-scatter,
// all-gather.
inline constexpr int kCollectiveKinds = 5;

struct Collective {
  int32_t first_slot = 0;  // into Engine::collective_ops_, one slot per member
  int32_t members = 0;
  int32_t issued = 0;      // members whose op the plan lists
  int32_t ready = 0;       // members whose op is ready
  OpKind kind = OpKind::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  Codec codec = Codec::kNone;  // an AllReduce's encoding at every hop
  double bytes = 0;
  int32_t repeat = 1;      // back-to-back AllReduces it stands for (Op::repeat)
  int32_t machine = 0;     // of the first member listed
  bool crosses_machines = false;
  SimTime duration_ns = 0;
  // Where communication shares the workers' cores: the rate a member's
  // compute gets beside it, the device's compute_rate_while_communicating
  // on the part of its time those cores do (all of it within a machine;
  // across machines its reductions, packing and codec, not the links'
  // time); and its own rate while a member's worker computes, the device's
  // collective_rate_while_computing on that same part where set, else the
  // compute's rate.
  double compute_rate = 1;
  double shared_rate = 1;
  // While it runs, where communication shares the workers' cores: its time
  // left at full rate as of since_ns, and how many members' workers are
  // computing (it then runs at shared_rate, paced by those members).
  bool running = false;
  double remaining_ns = 0;
  SimTime since_ns = 0;
  int32_t computing = 0;
  // Where machines share a computer's cores (Cluster::link_kernel_s_per_byte):
  // the cores its links' bytes keep the kernel busy on while it runs.
  double kernel_cores = 0;
  // Across machines: the bytes each of its links carries and their
  // nanoseconds per byte, by which what the NICs' buckets let across at once
  // comes off its time as it starts; while it runs, the share of its NICs'
  // bandwidth its other bytes take from the flows there (take_links).
  double link_bytes = 0;
  double link_ns_per_byte = 0;
  double link_share = 0;
  // The rate the other collectives on its NICs leave it: 1 over the most
  // any of its NICs' holders take of it together, where that passes 1.
  double nic_rate = 1;
  // Where workers share cores, a ring AllReduce across machines runs hop by
  // hop (ring_hops.cpp): its pieces of core work at full rate as priced
  // (packing per piece, one chunk's encode, decode and reduction), the
  // wire bytes of a chunk, the call's t_sync before the first hop, and the
  // members yet to end.
  bool hops = false;
  double hop_pack_ns = 0;
  double hop_encode_ns = 0;
  double hop_decode_ns = 0;
  double hop_reduce_ns = 0;
  double hop_bytes = 0;
  SimTime hop_sync_ns = 0;
  int32_t hop_members_left = 0;
};

// One member of a ring AllReduce run hop by hop: its next piece of core work
// (0 .. 2(p-1)), the chunks it has received (-1 until the call's t_sync has
// passed), whether a piece is on its core, what its NICs' buckets still let
// across at once, and when its link to the next member has sent its last
// chunk (a chunk waits for the one before it).
struct HopMember {
  int32_t next_piece = 0;
  int32_t received = -1;
  bool working = false;
  double burst_left = 0;
  SimTime link_free_ns = 0;
  bool polling = false;  // waits for its core's compute to let it in (shared_cores.cpp)
};

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

  void push(SimTime time_ns, OpId op, uint32_t tag) { events_.push(time_ns, now_ns_, op, tag); }
  void on_ready(OpId id);
  void start(OpId id);
  void allocate(OpId id);
  void finish(OpId id);
  void release(OpId next, OpId by);
  void release_after(int32_t worker, OpId next, OpId by, SimTime delay_ns);
  void post(OpId id);
  SimTime compute_duration_ns(OpId id);
  void start_compute(OpId id);
  void start_work(OpId id);
  // host_time.cpp: a GPU worker's host time per compute op (DeviceSpec::host_per_op).
  void price_host();
  bool start_host_part(OpId id);
  void end_host_part(OpId id);
  void end_work(OpId id);
  bool released_at_host_end(OpId id, OpId next) const;
  void leave_device(OpId id);
  void set_communicating(OpId id, bool starts);
  void reschedule_compute(CoreShare& share);
  void start_collective(Collective& c);
  void reschedule_collective(Collective& c);
  // collective_links.cpp: a collective across machines and its NICs.
  double collective_rate(const Collective& c) const { return (c.computing > 0 ? c.shared_rate : 1.0) * c.nic_rate; }
  void join_links(Collective& c);
  void leave_links(Collective& c);
  void reshare_links();
  void set_computing(int32_t worker, int32_t delta);
  void add_core_job(int32_t worker, OpId op, OpId by, double work_ns);
  OpId end_core_job(OpId op);
  void plan_hops(Collective& c, double pack_s);
  double hop_piece_ns(const Collective& c, int32_t piece) const;
  void start_hops(Collective& c);
  void advance_hop(int32_t slot, bool polled);
  void start_hop_piece(int32_t slot);
  bool core_computes(int32_t core) const;
  bool computes_on(int32_t core, int32_t worker) const;
  void compute_left_core(int32_t core, OpId op);
  void check_core(OpId op);
  void let_pollers_in(int32_t core);
  void on_hop_arrival(OpId op);
  void end_hop_piece(OpId op);
  void reschedule_core(int32_t core);
  void advance_core(int32_t core);
  uint32_t bump_core_event(OpId op, OpId by);
  void add_kernel_cores(double delta);
  void count_crossing_sends();
  double kernel_share() const;
  void end_collective(Collective& c);
  const std::vector<int32_t>& machines_of(const Collective& c);
  double take_links(Collective& c);
  double links_kernel_cores(const Collective& c, const LinkParams& link, double duration_s);
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
  std::vector<OpId> initially_ready_;                // ops with no deps and no stream predecessor
  std::vector<int32_t> successor_offsets_;  // op i's successors: successors_[offsets[i], offsets[i + 1])
  std::vector<OpId> successors_;            // stream successors and reverse deps, grouped by op
  std::vector<int32_t> machine_of_worker_;
  std::vector<int32_t> device_of_worker_;
  double shared_rate_ = 1;              // cluster's compute_rate_while_communicating
  bool sharing_ = false;                // either that or collective_rate_while_computing below 1
  SimTime handoff_ns_ = 0;              // cluster's handoff_s
  // Where the device prices a host time per compute op (else empty), per
  // op: a compute op's host time until it starts, then when that ends; its
  // parts done (HostPart bits); per worker: the op whose work runs (-1:
  // none) and the compute ops started whose work waits for it, in order.
  std::vector<SimTime> host_ns_;
  std::vector<uint8_t> host_parts_;
  std::vector<OpId> working_;
  std::vector<std::deque<OpId>> queued_work_;
  std::vector<OpId> handed_off_by_;     // per op released after a hand-off or a latency: the op releasing it, else -1
  std::vector<CoreShare> core_shares_;  // per worker, used when sharing_
  std::vector<std::vector<int32_t>> running_collectives_;  // per worker, likewise: the collectives it is in
  std::vector<int32_t> core_of_worker_;                    // with Cluster::shared_cores or shared_devices, else empty
  // Per shared core, or per physical device with Cluster::shared_devices
  // (whose jobs are compute ops only): the jobs on it.
  std::vector<std::vector<CoreJob>> core_jobs_;
  // Cluster::shared_cores: the cores' scheduling (who holds a core, pollers,
  // messages and hand-offs as core work, ring hops); without it the shared
  // processors are devices, whose compute ops share them and nothing else.
  bool core_scheduling_ = false;
  std::vector<CoreClock> core_clocks_;                     // per shared core
  std::vector<uint32_t> release_version_;                  // per op: its release job's version (shared cores)
  std::vector<int32_t> workers_on_core_;                   // per shared core: the plan's workers pinned there
  std::vector<HopMember> hop_members_;                     // per collective slot, with shared cores
  std::vector<int32_t> core_owner_;                        // per shared core: the worker whose compute holds it, or -1
  std::vector<std::vector<OpId>> queued_compute_;  // per shared core: compute ops waiting for the owner to block
  std::vector<std::vector<Poller>> pollers_;       // per shared core: polling threads' work waiting for its compute
  std::vector<int32_t> hop_slot_;                          // per op, with shared cores: a collective's slot, else -1
  double kernel_cores_ = 0;  // the running collectives' and moving sends' kernel cores, spread over the shared cores
  double crossing_bytes_per_ns_ = 0;  // the sends between machines' bytes moving, as last counted there

  std::vector<Collective> collectives_;
  std::vector<int32_t> crossing_;          // collectives across machines running as one block (not hop by hop)
  std::vector<int32_t> machines_scratch_;  // machines_of's answer
  std::vector<OpId> collective_ops_;
  std::vector<int32_t> issued_offsets_;             // per group: where its (member, kind) counters start
  std::vector<int32_t> issued_;                     // collectives each (group, member, kind) issued so far
  std::vector<std::vector<int32_t>> instances_;     // (group, kind) -> k -> collective

  FlowNetwork flows_;
  std::vector<FlowCompletion> completions_;  // reused buffer of the flows' reschedules

  EventQueue events_;
  SimTime now_ns_ = 0;
  int64_t finished_ = 0;
  bool has_work_ = false;                   // some op computes or moves bytes
  std::vector<double> live_bytes_;          // per worker: allocations not yet freed
  std::vector<double> peak_live_bytes_;
  RunRecord record_;
  SimResult result_;
};

}  // namespace trainsim::des_detail
