// Cores shared between a worker's compute and its communication
// (DeviceSpec::compute_rate_while_communicating) and the hand-off between
// its streams (DeviceSpec::handoff_s). Clusters are simple_cluster's round
// numbers: intra link 10 GB/s (10 B/ns) and 10 us, inter link 1 GB/s and
// 50 us, collective reduction 50 GB/s and t_sync 20 us.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::collective_op;
using testing_fixtures::compute_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simulate_built;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;  // nanoseconds
constexpr SimTime kMs = 1000000;

// Two workers, each computing `work_s` beside its AllReduce of 1e6 B with
// the other: each compute op's end and each AllReduce's end.
struct Beside {
  std::vector<SimTime> work_end, ar_end;
};
Beside compute_beside_allreduce(const Cluster& cluster, double work_s) {
  PlanBuilder b("test", 2, 1, 1);
  const int32_t g = b.group({0, 1});
  std::vector<OpId> work, ar;
  for (int32_t w = 0; w < 2; ++w) {
    work.push_back(b.add(compute_op(w, work_s)));
    ar.push_back(b.add(collective_op(w, OpKind::kAllReduce, g, 1e6)));
  }
  const SimResult r = simulate_built(b, cluster);
  Beside out;
  for (int32_t w = 0; w < 2; ++w) {
    out.work_end.push_back(r.timings[work[w]].end_ns);
    out.ar_end.push_back(r.timings[ar[w]].end_ns);
  }
  return out;
}

// DeviceSpec::compute_rate_while_communicating: where a worker's compute and
// its communication share the cores, a compute op progresses at the shared
// rate while its worker's collective is in flight, and the collective at the
// shared rate while any member's worker computes. The AllReduce of 1e6 B
// over 2 members (ring, docs/equations.md §2): 2α = 20 us, nβ = 100 us,
// nγ/2 = 10 us, + t_sync 20 us = 150 us at full rate.
TEST(DesCoreSharing, ComputeAndAnAllReduceBesideItShareTheCores) {
  for (const double rate : {1.0, 0.5, 0.25}) {
    Cluster cluster = simple_cluster(1, 2);
    cluster.device.compute_rate_while_communicating = rate;
    const Beside r = compute_beside_allreduce(cluster, 1e-3);
    // Both at `rate` until the AllReduce's 150 us of work is done, at 150/rate
    // us; by then the compute has done 150 us of its 1 ms, the rest at full rate.
    const auto ar_end = static_cast<SimTime>(std::llround(150e3 / rate));
    for (int32_t w = 0; w < 2; ++w) {
      EXPECT_EQ(r.ar_end[w], ar_end) << "rate " << rate;
      EXPECT_EQ(r.work_end[w], ar_end + 850 * kUs) << "rate " << rate;
    }
  }
}

// Across machines only the part of a collective the cores do slows beside
// compute; the links' time goes on. The AllReduce of 1e6 B between two
// machines (ring, docs/equations.md §2): 2α = 100 us, nβ = 1000 us, nγ/2 =
// 10 us, t_sync 20 us, packing at 1 GB/s 1000 us: 2130 us, of which the
// cores do 1010 us (γ and packing). At r = 0.5 it runs at 1 / (1010/2130 /
// 0.5 + 1120/2130) = 2130/3140 of full rate while a member computes.
TEST(DesCoreSharing, AcrossMachinesTheLinksTimeGoesOnBesideCompute) {
  for (const double rate : {1.0, 0.5}) {
    Cluster cluster = simple_cluster(2, 1);
    cluster.collective.pack_bytes_per_s = 1e9;
    cluster.device.compute_rate_while_communicating = rate;
    const Beside r = compute_beside_allreduce(cluster, 5e-3);
    // Both computing throughout: the AllReduce takes 2130 us of work at its
    // shared rate, 3140 us at r = 0.5 (4260 us if all of it slowed). The
    // compute shares the cores with the same 1010 us of the AllReduce's work,
    // so it too runs at 2130/3140 of full rate (not at r: the links' time
    // leaves its cores free): 2130 us of its 5 ms by 3140 us, the rest at
    // full rate.
    const double ar_end_us = rate == 1.0 ? 2130 : 3140;
    const double work_end_us = rate == 1.0 ? 5000 : 3140 + (5000 - 2130);
    for (int32_t w = 0; w < 2; ++w) {
      EXPECT_NEAR(static_cast<double>(r.ar_end[w]), ar_end_us * kUs, 2) << "rate " << rate;
      EXPECT_NEAR(static_cast<double>(r.work_end[w]), work_end_us * kUs, 2) << "rate " << rate;
    }
  }
}

// DeviceSpec::collective_rate_while_computing: the part of the collective
// the cores do runs at it while a member computes, and the compute beside
// it keeps compute_rate_while_communicating. Across machines, the
// AllReduce's 2130 us of work (above), 1010 us of it the cores', at 0.25:
// 1010 / 0.25 + 1120 = 5160 us beside compute at full rate, which ends at
// its 5 ms. Within a machine, with compute at 0.5 and the collective at
// 0.8: the 150 us AllReduce takes 187.5 us, the compute does 93.75 us of
// its 1 ms by then and ends at 187.5 + 906.25 = 1093.75 us.
TEST(DesCoreSharing, TheCollectivesOwnRateBesideComputeSlowsItsCoresPart) {
  Cluster across = simple_cluster(2, 1);
  across.collective.pack_bytes_per_s = 1e9;
  across.device.collective_rate_while_computing = 0.25;
  const Beside a = compute_beside_allreduce(across, 6e-3);
  Cluster within = simple_cluster(1, 2);
  within.device.compute_rate_while_communicating = 0.5;
  within.device.collective_rate_while_computing = 0.8;
  const Beside w = compute_beside_allreduce(within, 1e-3);
  for (int32_t m = 0; m < 2; ++m) {
    EXPECT_NEAR(static_cast<double>(a.ar_end[m]), 5160.0 * kUs, 2);
    EXPECT_NEAR(static_cast<double>(a.work_end[m]), 6000.0 * kUs, 2);
    EXPECT_NEAR(static_cast<double>(w.ar_end[m]), 187.5 * kUs, 2);
    EXPECT_NEAR(static_cast<double>(w.work_end[m]), 1093.75 * kUs, 2);
  }
  // Without compute beside it, the AllReduce keeps its full rate.
  EXPECT_NEAR(static_cast<double>(compute_beside_allreduce(across, 0).ar_end[0]), 2130.0 * kUs, 2);
}

// LinkSpec::burst_bytes on the links between machines: a collective's first
// bytes on each link cross at once from the NICs' buckets, which refill with
// the bandwidth its bytes leave unused. The AllReduce of 1e6 B between two
// machines takes 1130 us (below); each link carries 2·1/2·1e6 = 1e6 B at
// 1 B/ns. A full 200 KB bucket: 930 us, 800 of them its bytes' (a share of
// 800/930), so 130 KB refill meanwhile. The next one, at once: 1000 us, and
// 130 KB refill again. After 50 us of compute: 180 KB, 950 us.
TEST(DesCollectiveBurst, TheNicsBucketsShortenACollectiveByWhatTheyRefilled) {
  std::vector<OpId> ends;
  const auto simulate = [&ends](const Cluster& cluster) {
    PlanBuilder b("test", 2, 1, 1);
    const int32_t g = b.group({0, 1});
    ends.clear();
    std::vector<OpId> last(2);
    for (int32_t k = 0; k < 3; ++k) {
      for (int32_t w = 0; w < 2; ++w) {
        std::vector<OpId> after;
        if (k == 1) after = {last[w]};
        if (k == 2) after = {b.add(compute_op(w, 50e-6, {last[w]}))};
        last[w] = b.add(collective_op(w, OpKind::kAllReduce, g, 1e6, after));
        if (w == 0) ends.push_back(last[w]);
      }
    }
    return simulate_built(b, cluster);
  };
  Cluster cluster = simple_cluster(2, 1);
  cluster.inter_link.burst_bytes = 200e3;
  const SimResult r = simulate(cluster);
  EXPECT_NEAR(static_cast<double>(r.timings[ends[0]].end_ns), 930.0 * kUs, 2);
  EXPECT_NEAR(static_cast<double>(r.timings[ends[1]].end_ns - r.timings[ends[0]].end_ns), 1000.0 * kUs, 2);
  EXPECT_NEAR(static_cast<double>(r.timings[ends[2]].start_ns - r.timings[ends[1]].end_ns), 50.0 * kUs, 2);
  EXPECT_NEAR(static_cast<double>(r.timings[ends[2]].end_ns - r.timings[ends[2]].start_ns), 950.0 * kUs, 2);
  // Within one machine no NIC is crossed: its buckets change nothing.
  Cluster one = simple_cluster(1, 2);
  one.inter_link.burst_bytes = 200e3;
  EXPECT_EQ(simulate(one).timings.at(ends[0]).end_ns, 150 * kUs);
}

// Cluster::link_kernel_s_per_byte: where machines share a computer's cores,
// the kernel's work for the links' bytes takes those cores while a
// collective crosses machines. The AllReduce of 1e6 B between two machines
// is priced 2α + nβ + nγ/2 + t_sync = 100 + 1000 + 10 + 20 = 1130 us, the
// links busy for nβ = 1000 us of it: 2 links at 1 GB/s for 1000/1130 of the
// time. At 0.565 ns of kernel per byte that is 2 · 1e9 · 0.565e-9 ·
// 1000/1130 = 1 core, half of each of the 2 shared cores. Each compute op
// of 5 ms runs at that half while the AllReduce lasts, so ends at 10 ms. On
// the shared cores the AllReduce runs hop by hop (ring_hops_test.cpp):
// t_sync, a hop of 550 us (its chunk at 570 us), then its members wait for
// their cores' compute to end (10000 us), the reduction's 10 us at half
// rate, a hop: 10570 us. Without shared cores the field is unused.
TEST(DesCoreSharing, TheLinksKernelWorkTakesTheSharedCoresWhileACollectiveCrossesMachines) {
  for (const int64_t cores : {0, 2}) {
    Cluster cluster = simple_cluster(2, 1);
    cluster.shared_cores = cores;
    cluster.link_kernel_s_per_byte = 0.565e-9;
    const Beside r = compute_beside_allreduce(cluster, 5e-3);
    for (int32_t w = 0; w < 2; ++w) {
      EXPECT_NEAR(static_cast<double>(r.ar_end[w]), (cores == 0 ? 1130.0 : 10570.0) * kUs, 2) << cores << " cores";
      EXPECT_NEAR(static_cast<double>(r.work_end[w]), (cores == 0 ? 5000.0 : 10000.0) * kUs, 2) << cores << " cores";
    }
  }
  // Within one machine no link is crossed: nothing taken.
  Cluster one = simple_cluster(1, 2);
  one.shared_cores = 2;
  one.link_kernel_s_per_byte = 0.565e-9;
  EXPECT_EQ(compute_beside_allreduce(one, 5e-3).work_end[0], 5000 * kUs);
}

// The same for a send between machines: while its 1e6 B cross at 1 B/ns
// (1000 us), 1 ns of kernel per byte keeps 1e-9 · 1e9 = 1 core busy, half
// of each of the 2 shared cores. Worker 0's compute does 500 us of its 5 ms
// by then and ends at 5500 us; without the kernel's work at 5000 us.
TEST(DesCoreSharing, TheLinksKernelWorkTakesTheSharedCoresWhileASendCrossesMachines) {
  for (const double kernel_s_per_byte : {1e-9, 0.0}) {
    PlanBuilder b("test", 2, 1, 1);
    const OpId work = b.add(compute_op(0, 5e-3));
    const OpId s = b.add(send_op(0, 1, 1e6));
    b.add(recv_op(1, 0, s));
    Cluster cluster = simple_cluster(2, 1);
    cluster.shared_cores = 2;
    cluster.link_kernel_s_per_byte = kernel_s_per_byte;
    const SimResult r = simulate_built(b, cluster);
    EXPECT_EQ(r.timings[s].end_ns, 1000 * kUs);
    EXPECT_NEAR(static_cast<double>(r.timings[work].end_ns), (kernel_s_per_byte > 0 ? 5500.0 : 5000.0) * kUs, 2);
  }
}

TEST(DesCoreSharing, OneMemberComputingPacesTheAllReduceAndOpsSpeedUpWhenItEnds) {
  PlanBuilder b("test", 2, 1, 1);
  const int32_t g = b.group({0, 1});
  const OpId first = b.add(compute_op(0, 100e-6));
  const OpId second = b.add(compute_op(0, 1e-3));
  const OpId ar0 = b.add(collective_op(0, OpKind::kAllReduce, g, 1e6));
  const OpId ar1 = b.add(collective_op(1, OpKind::kAllReduce, g, 1e6));
  Cluster cluster = simple_cluster(1, 2);
  cluster.device.compute_rate_while_communicating = 0.5;
  const SimResult r = simulate_built(b, cluster);
  // Worker 0 computes throughout, so the AllReduce runs at half rate on both
  // members: 150 us of work, ends at 300 us. The first op's 100 us at half
  // rate end at 200 us; the second does 50 us by 300 us, then 950 us alone.
  EXPECT_EQ(r.timings[ar0].end_ns, 300 * kUs);
  EXPECT_EQ(r.timings[ar1].end_ns, 300 * kUs);
  EXPECT_EQ(r.timings[first].end_ns, 200 * kUs);
  EXPECT_EQ(r.timings[second].start_ns, 200 * kUs);
  EXPECT_EQ(r.timings[second].end_ns, 1250 * kUs);
}

TEST(DesCoreSharing, ABarrierKeepsItsTimeBesideCompute) {
  // A barrier's members wait asleep: it takes t_sync (20 us) whatever runs.
  PlanBuilder b("test", 2, 1, 1);
  const int32_t g = b.group({0, 1});
  b.add(compute_op(0, 1e-3));
  const OpId barrier = b.add(collective_op(0, OpKind::kBarrier, g, 0));
  b.add(collective_op(1, OpKind::kBarrier, g, 0));
  Cluster cluster = simple_cluster(1, 2);
  cluster.device.compute_rate_while_communicating = 0.5;
  EXPECT_EQ(simulate_built(b, cluster).timings[barrier].end_ns, 20 * kUs);
}

// DeviceSpec::handoff_s: a compute op that releases another stream of its
// own worker delays its stream's next op, not the op it releases.
TEST(DesHandoff, TheComputeStreamResumesAfterTheHandoffAndTheSendStartsAtOnce) {
  for (const double handoff_s : {30e-6, 0.0}) {
    PlanBuilder b("test", 2, 1, 1);
    const OpId f = b.add(compute_op(0, 1e-3));
    const OpId s = b.add(send_op(0, 1, 1e6, {f}));
    b.add(recv_op(1, 0, s));
    const OpId next = b.add(compute_op(0, 1e-3));
    const OpId alone = b.add(compute_op(0, 1e-3));  // hands nothing over: no gap after `next`
    Cluster cluster = simple_cluster(1, 2);
    cluster.device.handoff_s = handoff_s;
    const SimResult r = simulate_built(b, cluster);
    const auto gap = static_cast<SimTime>(std::llround(handoff_s * 1e9));
    EXPECT_EQ(r.timings[s].start_ns, 1 * kMs);
    EXPECT_EQ(r.timings[s].end_ns, 1100 * kUs);  // 1e6 B / 10 B/ns, with or without a hand-off
    EXPECT_EQ(r.timings[next].start_ns, 1 * kMs + gap);
    EXPECT_EQ(r.timings[alone].start_ns, 2 * kMs + gap);
  }
}

TEST(DesHandoff, AnOpOnAnotherWorkerIsNotAHandoff) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId f = b.add(compute_op(0, 1e-3));
  const OpId next = b.add(compute_op(0, 1e-3));
  const OpId other = b.add(compute_op(1, 1e-3, {f}));  // another worker's compute waits on f
  Cluster cluster = simple_cluster(1, 2);
  cluster.device.handoff_s = 30e-6;
  const SimResult r = simulate_built(b, cluster);
  EXPECT_EQ(r.timings[next].start_ns, 1 * kMs);
  EXPECT_EQ(r.timings[other].start_ns, 1 * kMs);
}

TEST(DesCoreSharing, AWorkerWithoutCommunicationKeepsItsFullRate) {
  PlanBuilder b("test", 3, 1, 1);
  const int32_t g = b.group({0, 1});
  b.add(collective_op(0, OpKind::kAllReduce, g, 1e6));
  b.add(collective_op(1, OpKind::kAllReduce, g, 1e6));
  const OpId alone = b.add(compute_op(2, 1e-3));
  Cluster cluster = simple_cluster(1, 3);
  cluster.device.compute_rate_while_communicating = 0.5;
  EXPECT_EQ(simulate_built(b, cluster).timings[alone].end_ns, 1 * kMs);
}

}  // namespace
}  // namespace trainsim
