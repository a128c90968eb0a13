// A ring AllReduce across machines on cores the workers share, hop by hop
// (sim/des/ring_hops.cpp). Clusters are simple_cluster's round numbers:
// intra link 10 GB/s and 10 us, inter link 1 GB/s and 50 us, reduction
// 50 GB/s, t_sync 20 us; quant8 here encodes 4 GB/s and decodes 40 GB/s of
// float32 bytes.
#include <gtest/gtest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::collective_op;
using testing_fixtures::compute_op;
using testing_fixtures::simple_cluster;
using testing_fixtures::simulate_built;

constexpr SimTime kUs = 1000;  // nanoseconds

Cluster hop_cluster(int64_t machines, int64_t devices_per_machine, int64_t shared_cores) {
  Cluster cluster = simple_cluster(machines, devices_per_machine);
  cluster.shared_cores = shared_cores;
  cluster.collective.quant8 = {4e9, 40e9};
  return cluster;
}

// Every worker's AllReduce of `bytes` (on the wire) with `codec`, and
// worker 0 computing `work_s` beside it (none where 0): the members' ends and
// the compute op's.
struct Ring {
  std::vector<SimTime> ends;
  SimTime work_end = 0;
};
Ring ring_allreduce(const Cluster& cluster, double bytes, Codec codec, double work_s) {
  const auto workers = static_cast<int32_t>(cluster.machines * cluster.devices_per_machine);
  PlanBuilder b("test", workers, 1, 1);
  std::vector<int32_t> all;
  for (int32_t w = 0; w < workers; ++w) all.push_back(w);
  const int32_t g = b.group(all);
  const OpId work = work_s > 0 ? b.add(compute_op(0, work_s)) : -1;
  std::vector<OpId> ar;
  for (int32_t w = 0; w < workers; ++w) {
    Op op = collective_op(w, OpKind::kAllReduce, g, bytes);
    op.codec = codec;
    ar.push_back(b.add(op));
  }
  const SimResult r = simulate_built(b, cluster);
  Ring out;
  for (const OpId id : ar) out.ends.push_back(r.timings[id].end_ns);
  if (work >= 0) out.work_end = r.timings[work].end_ns;
  return out;
}

// Alone, hop by hop takes the collective's price (docs/equations.md §2,
// allreduce/ring, with the codec at every hop): 4 members, 1e6 B on the
// wire, chunks of 250 KB (1 MB of float32): 6 hops of 50 + 250 us, 3
// reductions of 5 us, 4 encodes of 250 us, 7 decodes of 25 us, t_sync 20 us
// = 1800 + 15 + 1000 + 175 + 20 = 3010 us, as without shared cores.
TEST(DesRingHops, AloneTheHopsTakeTheCollectivesPrice) {
  for (const int64_t cores : {4, 0}) {
    const Ring r = ring_allreduce(hop_cluster(4, 1, cores), 1e6, Codec::kQuant8, 0);
    for (const SimTime end : r.ends) EXPECT_NEAR(static_cast<double>(end), 3010.0 * kUs, 4) << cores << " cores";
  }
}

// The NICs' full buckets (200 KB, FlowNetwork::hold_nics) let the first
// chunk's first 200 KB across at once: its hop takes 50 + 50 us, and the
// AllReduce ends 200 us sooner, 2810 us, as the collective priced as one
// ends (its time less the burst at β).
TEST(DesRingHops, TheNicsBucketsLetTheFirstChunksAcrossAtOnce) {
  for (const int64_t cores : {4, 0}) {
    Cluster cluster = hop_cluster(4, 1, cores);
    cluster.inter_link.burst_bytes = 200e3;
    const Ring r = ring_allreduce(cluster, 1e6, Codec::kQuant8, 0);
    for (const SimTime end : r.ends) EXPECT_NEAR(static_cast<double>(end), 2810.0 * kUs, 4) << cores << " cores";
  }
}

// Worker 0 computes 1 ms beside a 2-member quant8 AllReduce of 1e6 B, each
// worker on its own core. Chunks of 500 KB (2 MB of float32): encode 500 us,
// decode 50 us, reduction 10 us, hop 550 us. Member 0's first piece shares
// core 0 with the compute op, each at half rate; its later ones wait, as
// pollers, until the compute op has ended:
// - t_sync to 20 us (the compute op alone: 20 us done); piece 0 (encode,
//   500 us): member 1's ends at 520 (its chunk reaches member 0 at 1070),
//   member 0's at 1020 (the compute op 520 us done; member 0's chunk
//   reaches member 1 at 1570);
// - the compute op's last 480 us alone end at 1500; member 0's chunk came
//   at 1070, so its piece 1 (decode, reduce, encode, decode: 610 us) runs
//   1500-2110, its chunk at member 1 at 2660;
// - member 1's piece 1 from 1570 to 2180 (its chunk at member 0 at 2730),
//   its last piece (a decode) from 2660: it ends at 2710; member 0's from
//   2730: it ends at 2780.
TEST(DesRingHops, AMemberWhoseCoreComputesHoldsTheRingBack) {
  const Ring r = ring_allreduce(hop_cluster(2, 1, 2), 1e6, Codec::kQuant8, 1e-3);
  EXPECT_NEAR(static_cast<double>(r.ends[0]), 2780.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(r.ends[1]), 2710.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(r.work_end), 1500.0 * kUs, 4);
  // Alone: 20 + 500 + 550 + 610 + 550 + 50 = 2280 us, both members.
  const Ring alone = ring_allreduce(hop_cluster(2, 1, 2), 1e6, Codec::kQuant8, 0);
  EXPECT_NEAR(static_cast<double>(alone.ends[0]), 2280.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(alone.ends[1]), 2280.0 * kUs, 4);
}

// Two members per core: the pieces' prices hold both at work at once, so
// alone they keep their price, and beside a compute op on that core each
// runs at a third of the core instead of a half. The 2-member AllReduce on
// one core, worker 0 computing 1 ms: the pieces 0 (500 us) take 750 us (20
// to 770; the compute op 270 us done), the chunks arrive at 1320 and wait
// for the compute op's end at 1500; the pieces 1 (610 us, at half rate)
// end at 2110, the last (50 us) at 2710.
TEST(DesRingHops, ThePiecesPricesHoldEveryWorkerOfTheirCoreAtWork) {
  const Ring alone = ring_allreduce(hop_cluster(2, 1, 1), 1e6, Codec::kQuant8, 0);
  EXPECT_NEAR(static_cast<double>(alone.ends[0]), 2280.0 * kUs, 4);
  const Ring beside = ring_allreduce(hop_cluster(2, 1, 1), 1e6, Codec::kQuant8, 1e-3);
  for (const SimTime end : beside.ends) EXPECT_NEAR(static_cast<double>(end), 2710.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(beside.work_end), 1500.0 * kUs, 4);
}

// A member's chunk waits on its link for the chunk before it. 2 machines of
// 2 workers, each worker on its own core, no codec, 4e6 B: chunks of 1e6 B,
// 110 us within a machine (100 + 10), 1050 us between (1000 + 50), each
// reduction 20 us. Members 1 and 3 send between machines: their links carry
// a chunk every 1000 us from 20 us on, the sixth sent at 6020 and at
// members 0 and 2 at 6070 us, when they end; members 1 and 3 get their last
// chunks from members 0 and 2 at 5180 us. Priced as one, it would take
// 6 · 1050 + 3 · 20 + 20 = 6380 us.
TEST(DesRingHops, AChunkWaitsOnItsLinkForTheChunkBeforeIt) {
  const Ring r = ring_allreduce(hop_cluster(2, 2, 4), 4e6, Codec::kNone, 0);
  EXPECT_NEAR(static_cast<double>(r.ends[0]), 6070.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(r.ends[1]), 5180.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(r.ends[2]), 6070.0 * kUs, 4);
  EXPECT_NEAR(static_cast<double>(r.ends[3]), 5180.0 * kUs, 4);
  const Ring joint = ring_allreduce(hop_cluster(2, 2, 0), 4e6, Codec::kNone, 0);
  EXPECT_NEAR(static_cast<double>(joint.ends[0]), 6380.0 * kUs, 4);
}

}  // namespace
}  // namespace trainsim
