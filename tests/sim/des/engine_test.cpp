// The event engine: op ordering, transfers sharing ports, collectives,
// stragglers and jitter, peak memory. Clusters are simple_cluster's round
// numbers: intra link 10 GB/s (10 B/ns) and 10 us, inter link 1 GB/s and
// 50 us, host link 10 GB/s and 10 us, host reduction 20 GB/s, collective
// reduction 50 GB/s and t_sync 20 us.
#include "sim/des/engine.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "model/error.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::collective_op;
using testing_fixtures::compute_op;
using testing_fixtures::host_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;     // nanoseconds
constexpr SimTime kMs = 1000000;

SimResult run(PlanBuilder& b, const Cluster& cluster, SimOptions options = {}) {
  const Plan plan = std::move(b).build();
  return simulate_plan(plan, cluster, options);
}

// When each member of an AllReduce of `bytes` by workers 0..3 ends on
// `cluster`, each member's op as `edit` leaves it.
std::vector<SimTime> all_reduce_ends(double bytes, const Cluster& cluster, const std::function<void(Op&)>& edit = {}) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t g = b.group({0, 1, 2, 3});
  std::vector<OpId> ar;
  for (int32_t w = 0; w < 4; ++w) {
    Op op = collective_op(w, OpKind::kAllReduce, g, bytes);
    if (edit) edit(op);
    ar.push_back(b.add(op));
  }
  const SimResult r = run(b, cluster);
  std::vector<SimTime> ends;
  for (const OpId id : ar) ends.push_back(r.timings[id].end_ns);
  return ends;
}

TEST(DesEngine, ComputeChainEndsAtTheSumOfItsWork) {
  PlanBuilder b("test", 1, 1, 1);
  const OpId a = b.add(compute_op(0, 1e-3));
  const OpId c = b.add(compute_op(0, 2e-3));
  const OpId d = b.add(compute_op(0, 0.5e-3));
  const SimResult r = run(b, simple_cluster(1, 1));
  // In order on one stream: [0, 1], [1, 3], [3, 3.5] ms.
  EXPECT_EQ(r.timings[a].end_ns, 1 * kMs);
  EXPECT_EQ(r.timings[c].start_ns, 1 * kMs);
  EXPECT_EQ(r.timings[c].end_ns, 3 * kMs);
  EXPECT_EQ(r.timings[d].end_ns, 3500 * kUs);
  EXPECT_DOUBLE_EQ(r.makespan_s, 3.5e-3);
  EXPECT_EQ(r.events, 3);
}

TEST(DesEngine, AnOpWaitsForBothItsStreamPredecessorAndItsDeps) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId a = b.add(compute_op(0, 1e-3));
  const OpId slow = b.add(compute_op(1, 3e-3));
  const OpId after = b.add(compute_op(0, 1e-3, {slow}));
  const OpId on_send_stream = b.add(send_op(0, 1, 0));  // no deps, another stream: starts at 0
  const OpId received = b.add(recv_op(1, 0, on_send_stream));
  const SimResult r = run(b, simple_cluster(1, 2));
  // `after` follows `a` (ends 1 ms) and `slow` (ends 3 ms): it starts at 3, ends at 4.
  EXPECT_EQ(r.timings[a].end_ns, 1 * kMs);
  EXPECT_EQ(r.timings[after].start_ns, 3 * kMs);
  EXPECT_EQ(r.timings[after].end_ns, 4 * kMs);
  EXPECT_EQ(r.timings[on_send_stream].start_ns, 0);
  EXPECT_EQ(r.timings[on_send_stream].end_ns, 0);  // no bytes: nothing on its stream
  EXPECT_EQ(r.timings[received].end_ns, 10 * kUs);  // the intra-link latency alone
}

TEST(DesEngine, SendTakesBytesOverBandwidthAndItsRecvALatencyMore) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId f = b.add(compute_op(0, 1e-3));
  const OpId s = b.add(send_op(0, 1, 1e6, {f}));
  const OpId rv = b.add(recv_op(1, 0, s));
  const OpId g = b.add(compute_op(1, 1e-3, {rv}));
  const SimResult r = run(b, simple_cluster(1, 2));
  // Starts when f ends (1 ms); 1e6 B / 10 B/ns = 100 us: ends at 1.1 ms; the
  // message is in flight 10 us more: the recv ends at 1.11 ms.
  EXPECT_EQ(r.timings[s].start_ns, 1 * kMs);
  EXPECT_EQ(r.timings[s].end_ns, 1100 * kUs);
  EXPECT_EQ(r.timings[rv].start_ns, 1110 * kUs);
  EXPECT_EQ(r.timings[rv].end_ns, 1110 * kUs);  // a recv takes no time of its own
  EXPECT_EQ(r.timings[g].start_ns, 1110 * kUs);
}

// LogP's L: a latency is in flight, not on the send's stream, so messages
// follow each other at the bandwidth's pace, each arriving a latency later.
TEST(DesEngine, SendsOnOneStreamOverlapTheirLatencies) {
  PlanBuilder b("test", 2, 1, 1);
  std::vector<OpId> sends, recvs;
  for (int k = 0; k < 3; ++k) sends.push_back(b.add(send_op(0, 1, 1e5)));
  for (int k = 0; k < 3; ++k) recvs.push_back(b.add(recv_op(1, 0, sends[static_cast<size_t>(k)])));
  Cluster cluster = simple_cluster(1, 2);
  cluster.intra_link.latency_s = 50e-6;
  const SimResult r = run(b, cluster);
  // 1e5 B / 10 B/ns = 10 us each, back to back; each recv 50 us after its send.
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(r.timings[sends[static_cast<size_t>(k)]].end_ns, (k + 1) * 10 * kUs);
    EXPECT_EQ(r.timings[recvs[static_cast<size_t>(k)]].end_ns, (k + 1) * 10 * kUs + 50 * kUs);
  }
}

TEST(DesEngine, ConcurrentSendsOutOfOneDeviceShareItsEgress) {
  PlanBuilder b("test", 3, 1, 1);
  Op to_one = send_op(0, 1, 1e6);
  Op to_two = send_op(0, 2, 2e6);
  const OpId s1 = b.add(to_one);
  // The engine times an op by its kind, not its stream: on another queue the
  // two sends are in flight at once.
  to_two.stream = StreamKind::kRecv;
  const OpId s2 = b.add(to_two);
  b.add(recv_op(1, 0, s1));
  b.add(recv_op(2, 0, s2));
  const SimResult r = run(b, simple_cluster(1, 3));
  // Both share device 0's 10 B/ns egress at 5 B/ns each. s1: 1e6 B / 5 B/ns
  // = 200 us. By then s2 has moved 1e6 B; alone it gets 10 B/ns for the
  // other 1e6 B: 100 us more -> 300 us.
  EXPECT_EQ(r.timings[s1].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[s2].end_ns, 300 * kUs);
}

TEST(DesEngine, ConcurrentSendsIntoOneDeviceShareItsIngress) {
  PlanBuilder b("test", 3, 1, 1);
  const OpId s0 = b.add(send_op(0, 2, 1e6));
  const OpId s1 = b.add(send_op(1, 2, 1e6));
  b.add(recv_op(2, 0, s0));
  b.add(recv_op(2, 1, s1));
  const SimResult r = run(b, simple_cluster(1, 3));
  // Device 2's ingress carries both at 5 B/ns: 1e6 / 5 ns = 200 us each.
  EXPECT_EQ(r.timings[s0].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[s1].end_ns, 200 * kUs);
}

TEST(DesEngine, SendsLeavingOneMachineShareItsNic) {
  PlanBuilder b("test", 4, 1, 1);
  const OpId s0 = b.add(send_op(0, 2, 1e6));
  const OpId s1 = b.add(send_op(1, 3, 1e6));
  const OpId r0 = b.add(recv_op(2, 0, s0));
  b.add(recv_op(3, 1, s1));
  const SimResult r = run(b, simple_cluster(2, 2));
  // Machine 0's NIC egress (1 B/ns) carries both at 0.5 B/ns: 2000 us; the
  // inter-link latency, 50 us, after that.
  EXPECT_EQ(r.timings[s0].end_ns, 2000 * kUs);
  EXPECT_EQ(r.timings[s1].end_ns, 2000 * kUs);
  EXPECT_EQ(r.timings[r0].end_ns, 2050 * kUs);
}

TEST(DesEngine, SendsBetweenDisjointPairsDoNotShare) {
  PlanBuilder b("test", 4, 1, 1);
  const OpId s1 = b.add(send_op(0, 1, 1e6));
  const OpId s2 = b.add(send_op(2, 3, 1e6));
  b.add(recv_op(1, 0, s1));
  b.add(recv_op(3, 2, s2));
  const SimResult r = run(b, simple_cluster(1, 4));
  // Disjoint ports: each 100 us.
  EXPECT_EQ(r.timings[s1].end_ns, 100 * kUs);
  EXPECT_EQ(r.timings[s2].end_ns, 100 * kUs);
}

TEST(DesEngine, CrossMachineSendIsPacedByTheSlowerNic) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId s = b.add(send_op(0, 1, 1e6));
  const OpId rv = b.add(recv_op(1, 0, s));
  const SimResult r = run(b, simple_cluster(2, 1));
  // Devices 0 and 1 sit on machines 0 and 1: the NIC's 1 B/ns (slower than
  // the 10 B/ns device ports): 1e6 ns; the recv 50 us later (inter latency).
  EXPECT_EQ(r.timings[s].end_ns, 1000 * kUs);
  EXPECT_EQ(r.timings[rv].end_ns, 1050 * kUs);
}

TEST(DesEngine, CopiesUseTheHostLinkOnePortPerDirection) {
  PlanBuilder b("test", 1, 1, 1);
  const OpId down = b.add(host_op(0, OpKind::kCopyToHost, 1e6));
  const OpId up = b.add(host_op(0, OpKind::kCopyToDevice, 2e6));
  const OpId second_down = b.add(host_op(0, OpKind::kCopyToHost, 1e6));
  const SimResult r = run(b, simple_cluster(1, 1));
  // Host link 10 us + bytes / 10 B/ns; the two directions do not share:
  // down 110 us, up 10 + 200 = 210 us; the second down copy queues behind the
  // first on the device-to-host stream: 110 + 110 = 220 us.
  EXPECT_EQ(r.timings[down].end_ns, 110 * kUs);
  EXPECT_EQ(r.timings[up].end_ns, 210 * kUs);
  EXPECT_EQ(r.timings[second_down].start_ns, 110 * kUs);
  EXPECT_EQ(r.timings[second_down].end_ns, 220 * kUs);
}

TEST(DesEngine, HostAccumulationsOnOneMachineShareItsReductionThroughput) {
  PlanBuilder b("test", 3, 1, 1);
  const OpId a = b.add(host_op(0, OpKind::kHostAccumulate, 2e6));
  const OpId c = b.add(host_op(1, OpKind::kHostAccumulate, 2e6));
  const OpId other_machine = b.add(host_op(2, OpKind::kHostAccumulate, 2e6));
  const SimResult r = run(b, simple_cluster(2, 2));
  // Machine 0 (workers 0, 1) sums at 20 B/ns shared: 10 B/ns each, 2e6 B ->
  // 200 us. Worker 2 is alone on machine 1: 2e6 / 20 = 100 us. No latency.
  EXPECT_EQ(r.timings[a].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[c].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[other_machine].end_ns, 100 * kUs);
}

TEST(DesEngine, AllReduceStartsWithItsLastMemberAndLastsTheRingFormula) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t g = b.group({0, 1, 2, 3});
  std::vector<OpId> ar;
  for (int32_t w = 0; w < 4; ++w) {
    const OpId work = b.add(compute_op(w, (w + 1) * 1e-3));
    ar.push_back(b.add(collective_op(w, OpKind::kAllReduce, g, 1e6, {work})));
  }
  const SimResult r = run(b, simple_cluster(1, 4));
  // The last member is ready at 4 ms. Ring, p = 4, intra link (docs/equations.md §2):
  // 2(p-1)α = 6 x 10 us = 60 us; 2(p-1)/p nβ = 1.5 x 1e6 x 0.1 ns = 150 us;
  // (p-1)/p nγ = 0.75 x 1e6 x 0.02 ns = 15 us; + t_sync 20 us = 245 us.
  for (OpId id : ar) {
    EXPECT_EQ(r.timings[id].start_ns, 4 * kMs);
    EXPECT_EQ(r.timings[id].end_ns, 4245 * kUs);
  }
}

TEST(DesEngine, AllReducePacksAtTheClustersMeasuredRate) {
  // As AllReduceStartsWithItsLastMemberAndLastsTheRingFormula on a cluster
  // that packs at 10 GB/s: 1 MB / 1e10 = 100 us more, 245 + 100 = 345 us.
  Cluster cluster = simple_cluster(1, 4);
  cluster.collective.pack_bytes_per_s = 10e9;
  for (const SimTime end : all_reduce_ends(1e6, cluster)) EXPECT_EQ(end, 345 * kUs);
}

TEST(DesEngine, EveryCallOfARepeatedAllReducePaysThePackingsFixedPart) {
  // As AllReducePacksAtTheClustersMeasuredRate with the packing's fixed
  // part, 25 us a call: 370 us. The same 1 MB as 4 calls of 250 KB back to
  // back (repeat 4): each 6α = 60 us, 1.5·nβ = 37.5 us, 0.75·nγ = 3.75 us,
  // t_sync 20 us, packing 25 + 25 = 50 us: 171.25 us, 685 us the four.
  for (const int32_t repeat : {1, 4}) {
    Cluster cluster = simple_cluster(1, 4);
    cluster.collective.pack_bytes_per_s = 10e9;
    cluster.collective.pack_latency_s = 25e-6;
    for (const SimTime end : all_reduce_ends(1e6, cluster, [repeat](Op& op) { op.repeat = repeat; })) {
      EXPECT_EQ(end, repeat == 1 ? 370 * kUs : 685 * kUs) << "repeat " << repeat;
    }
  }
}

TEST(DesEngine, TheLibrarysAllReduceRunsAtItsOwnMeasuredHops) {
  // 1 MB on 4 members of one machine. With NCCL's hops (5 us, 40 GB/s, no
  // γ): 6·5 + 1.5·1e6 / 40e9 = 30 + 37.5 = 67.5 us, + t_sync 20 us =
  // 87.5 us, packing nothing (NCCL sums the gradients where the GPUs keep
  // them). Without them, as a ring on the cluster's: 60 + 150 + 15 + 20 =
  // 245 us, + packing 1 MB at 10 GB/s, 100 us = 345 us.
  for (const bool measured : {true, false}) {
    Cluster cluster = simple_cluster(1, 4);
    cluster.collective.pack_bytes_per_s = 10e9;
    if (measured) cluster.collective.library = CollectiveSpec::LibraryHops{40e9, 5e-6};
    const auto library = [](Op& op) { op.algorithm = CollectiveAlgorithm::kLibrary; };
    for (const SimTime end : all_reduce_ends(1e6, cluster, library)) {
      EXPECT_EQ(end, measured ? 87500 : 345 * kUs) << measured;
    }
  }
}

TEST(DesEngine, ACodecsAllReducePacksItsFloat32Gradient) {
  // trunc16 halves the wire, not the packing (the executor flattens and
  // unflattens the float32 gradient): 0.5 MB on the wire, p = 4:
  // 6α = 60 us, 1.5·nβ = 75 us, 0.75·nγ = 7.5 us, + 20 us = 162.5 us; the
  // codec's rates are absent (0 s); packing the 1 MB gradient at 10 GB/s
  // 100 us: 262.5 us (62.5 us less where the wire's bytes were packed).
  Cluster cluster = simple_cluster(1, 4);
  cluster.collective.pack_bytes_per_s = 10e9;
  for (const SimTime end : all_reduce_ends(0.5e6, cluster, [](Op& op) { op.codec = Codec::kTrunc16; })) {
    EXPECT_EQ(end, 262500);
  }
}

TEST(DesEngine, AllReduceAcrossMachinesUsesTheSlowerLink) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t inside = b.group({0, 1});
  const int32_t across = b.group({1, 2});
  const OpId in0 = b.add(collective_op(0, OpKind::kAllReduce, inside, 1e6));
  b.add(collective_op(1, OpKind::kAllReduce, inside, 1e6));
  Op x1 = collective_op(1, OpKind::kAllReduce, across, 1e6);
  x1.stream = StreamKind::kRecv;  // its own queue, so it runs beside the first
  const OpId across1 = b.add(x1);
  b.add(collective_op(2, OpKind::kAllReduce, across, 1e6));
  const SimResult r = run(b, simple_cluster(2, 2));
  // {0, 1} on machine 0, p = 2: 2α = 20 us, nβ = 100 us, nγ/2 = 10 us, + 20 us = 150 us.
  // {1, 2} crosses: α = max(10, 50) = 50 us, β = 1 ns/B: 100 + 1000 + 10 + 20 = 1130 us.
  EXPECT_EQ(r.timings[in0].end_ns, 150 * kUs);
  EXPECT_EQ(r.timings[across1].end_ns, 1130 * kUs);
}

TEST(DesEngine, BroadcastLastsTheBinomialTree) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t g = b.group({0, 1, 2, 3});
  std::vector<OpId> bc;
  for (int32_t w = 0; w < 4; ++w) bc.push_back(b.add(collective_op(w, OpKind::kBroadcast, g, 1e6)));
  const SimResult r = run(b, simple_cluster(1, 4));
  // ⌈lg 4⌉ (α + nβ) = 2 x (10 + 100) us = 220 us, + t_sync 20 us = 240 us.
  for (OpId id : bc) EXPECT_EQ(r.timings[id].end_ns, 240 * kUs);
}

TEST(DesEngine, BarrierReleasesEveryMemberWhenTheLastArrives) {
  PlanBuilder b("test", 3, 1, 1);
  const int32_t g = b.group({0, 1, 2});
  std::vector<OpId> next;
  for (int32_t w = 0; w < 3; ++w) {
    b.add(compute_op(w, (w + 1) * 1e-3));
    Op barrier = collective_op(w, OpKind::kBarrier, g, 0);
    barrier.stream = StreamKind::kCompute;
    b.add(barrier);
    next.push_back(b.add(compute_op(w, 1e-3)));
  }
  const SimResult r = run(b, simple_cluster(1, 3));
  // Arrivals at 1, 2, 3 ms; the barrier takes t_sync = 20 us (docs/equations.md
  // §2): all continue at 3.02 ms.
  for (OpId id : next) {
    EXPECT_EQ(r.timings[id].start_ns, 3 * kMs + 20 * kUs);
    EXPECT_EQ(r.timings[id].end_ns, 4 * kMs + 20 * kUs);
  }
}

TEST(DesEngine, CollectivesIssuedInCrossedOrdersAreReportedNotHung) {
  // Worker 0 issues the {0,1} AllReduce first, worker 1 the {0,1,2} one first:
  // each waits for the other forever. No dep cycle, so validate_plan passes.
  PlanBuilder b("test", 3, 1, 1);
  const int32_t pair = b.group({0, 1});
  const int32_t all = b.group({0, 1, 2});
  b.add(collective_op(0, OpKind::kAllReduce, pair, 1));
  b.add(collective_op(0, OpKind::kAllReduce, all, 1));
  b.add(collective_op(1, OpKind::kAllReduce, all, 1));
  b.add(collective_op(1, OpKind::kAllReduce, pair, 1));
  b.add(collective_op(2, OpKind::kAllReduce, all, 1));
  EXPECT_THROW(run(b, simple_cluster(1, 3)), std::logic_error);
}

TEST(DesEngine, ACollectiveSomeMemberNeverIssuesIsAPlanBug) {
  PlanBuilder b("test", 2, 1, 1);
  const int32_t pair = b.group({0, 1});
  b.add(collective_op(0, OpKind::kAllReduce, pair, 1));  // worker 1 has no counterpart
  EXPECT_THROW(run(b, simple_cluster(1, 2)), std::logic_error);
}

// Two workers with 50 compute ops of 1 ms each (ops 0..99 alternate between
// them), then worker 1 sends 1e6 B to worker 0: the straggler tests' plan.
Plan straggler_plan() {
  PlanBuilder b("test", 2, 1, 1);
  OpId last = -1;
  for (int i = 0; i < 100; ++i) last = b.add(compute_op(i % 2, 1e-3));
  const OpId s = b.add(send_op(1, 0, 1e6, {last}));
  b.add(recv_op(0, 1, s));
  return std::move(b).build();
}

std::vector<SimTime> ends(const SimResult& r) {
  std::vector<SimTime> e;
  for (const OpTiming& t : r.timings) e.push_back(t.end_ns);
  return e;
}

TEST(DesStragglers, TheSameSeedRepeatsARunExactly) {
  const Plan plan = straggler_plan();
  SimOptions o;
  o.straggler_probability = 0.5;
  o.straggler_slowdown = 1.5;
  o.jitter = 0.1;
  o.seed = 42;
  EXPECT_EQ(ends(simulate_plan(plan, simple_cluster(1, 2), o)), ends(simulate_plan(plan, simple_cluster(1, 2), o)));
}

TEST(DesStragglers, AnotherSeedGivesAnotherRun) {
  const Plan plan = straggler_plan();
  SimOptions o;
  o.straggler_probability = 0.5;
  o.straggler_slowdown = 1.5;
  o.seed = 1;
  const auto first = ends(simulate_plan(plan, simple_cluster(1, 2), o));
  o.seed = 2;
  // 100 draws at p = 0.5: the two seeds agree on all of them with probability 2^-100.
  EXPECT_NE(first, ends(simulate_plan(plan, simple_cluster(1, 2), o)));
}

TEST(DesStragglers, ProbabilityZeroIsExact) {
  const Plan plan = straggler_plan();
  SimOptions o;
  o.straggler_probability = 0;
  o.straggler_slowdown = 3;
  const SimResult r = simulate_plan(plan, simple_cluster(1, 2), o);
  for (size_t id = 0; id < 100; ++id) {
    EXPECT_EQ(r.timings[id].end_ns - r.timings[id].start_ns, 1 * kMs);
  }
}

TEST(DesStragglers, ProbabilityOneSlowdownTwoDoublesEveryComputeButNotTransfers) {
  const Plan plan = straggler_plan();
  SimOptions o;
  o.straggler_probability = 1;
  o.straggler_slowdown = 2;
  const SimResult r = simulate_plan(plan, simple_cluster(1, 2), o);
  for (size_t id = 0; id < 100; ++id) {
    EXPECT_EQ(r.timings[id].end_ns - r.timings[id].start_ns, 2 * kMs);
  }
  // Worker 1's 50 ops end at 100 ms; the send still takes 100 us.
  EXPECT_EQ(r.timings[100].start_ns, 100 * kMs);
  EXPECT_EQ(r.timings[100].end_ns, 100 * kMs + 100 * kUs);
}

TEST(DesStragglers, JitterFactorsHaveMeanOneAndTheRequestedSpread) {
  constexpr int kOps = 20000;
  PlanBuilder b("test", 1, 1, 1);
  for (int i = 0; i < kOps; ++i) b.add(compute_op(0, 1e-3));
  const Plan plan = std::move(b).build();
  SimOptions o;
  o.jitter = 0.2;
  o.seed = 7;
  const SimResult r = simulate_plan(plan, simple_cluster(1, 1), o);
  double sum = 0, sum_sq = 0;
  for (const OpTiming& t : r.timings) {
    const double factor = static_cast<double>(t.end_ns - t.start_ns) / kMs;
    sum += factor;
    sum_sq += factor * factor;
  }
  const double mean = sum / kOps;
  const double sd = std::sqrt(sum_sq / kOps - mean * mean);
  // Standard error of the mean: 0.2 / sqrt(20000) = 0.0014; 0.01 is 7 of them.
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(sd, 0.2, 0.01);
}

TEST(DesEngine, PeakMemoryIsStaticPlusTheLargestLiveAllocation) {
  PlanBuilder b("test", 1, 1, 1);
  b.worker(0).static_bytes = 100;
  // F1 +10, F2 +20 (live 30), B2 -20, B1 -10, F3 +5: the peak is 30 live.
  Op f1 = compute_op(0, 1e-3);
  f1.alloc_bytes = 10;
  Op f2 = compute_op(0, 1e-3);
  f2.alloc_bytes = 20;
  Op b2 = compute_op(0, 1e-3, {}, 0, OpKind::kBackward);
  b2.free_bytes = 20;
  Op b1 = compute_op(0, 1e-3, {}, 0, OpKind::kBackward);
  b1.free_bytes = 10;
  Op f3 = compute_op(0, 1e-3);
  f3.alloc_bytes = 5;
  for (const Op& op : {f1, f2, b2, b1, f3}) b.add(op);
  const SimResult r = run(b, simple_cluster(1, 1));
  EXPECT_DOUBLE_EQ(r.workers[0].peak_memory_bytes, 130);
}

TEST(DesEngine, BadStragglerAndJitterOptionsAreInputErrors) {
  PlanBuilder b("test", 1, 1, 1);
  b.add(compute_op(0, 1e-3));
  const Plan plan = std::move(b).build();
  SimOptions o;
  o.straggler_probability = 1.5;
  EXPECT_THROW(simulate_plan(plan, simple_cluster(1, 1), o), InputError);
  o = {};
  o.straggler_slowdown = 0.5;
  EXPECT_THROW(simulate_plan(plan, simple_cluster(1, 1), o), InputError);
  o = {};
  o.jitter = -0.1;
  EXPECT_THROW(simulate_plan(plan, simple_cluster(1, 1), o), InputError);
}

TEST(DesEngine, APlanWithMoreWorkersThanDevicesIsAnInputError) {
  PlanBuilder b("test", 3, 1, 1);
  for (int32_t w = 0; w < 3; ++w) b.add(compute_op(w, 1e-3));
  const Plan plan = std::move(b).build();
  EXPECT_THROW(simulate_plan(plan, simple_cluster(1, 2), {}), InputError);
}

}  // namespace
}  // namespace trainsim
