// A link's token bucket (LinkSpec::burst_bytes): a send that starts on an
// idle link takes what its bucket holds at once and the rest at the
// bandwidth; the bucket refills at the bandwidth while the link is idle, up
// to its depth. Clusters are simple_cluster's round numbers: inter link
// 1 B/ns and 50 us between the two machines; a bucket of 2.5e5 B on it.
#include <gtest/gtest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;  // nanoseconds

// Sends from worker 0 (machine 0) to worker 1 (machine 1), one after
// another on one stream, with `gap_s` of work on that stream before each
// send but the first: each send's (start, end) and each recv's end.
struct Sent {
  std::vector<SimTime> start, end, arrived;
};
Sent sends(const std::vector<double>& bytes, double gap_s, double burst_bytes) {
  PlanBuilder b("test", 2, 1, 1);
  std::vector<OpId> s, r;
  for (size_t k = 0; k < bytes.size(); ++k) {
    if (k > 0) {
      Op gap = compute_op(0, gap_s);
      gap.stream = StreamKind::kSend;
      b.add(gap);
    }
    s.push_back(b.add(send_op(0, 1, bytes[k])));
  }
  for (const OpId send : s) r.push_back(b.add(recv_op(1, 0, send)));
  Cluster cluster = simple_cluster(2, 1);
  cluster.inter_link.burst_bytes = burst_bytes;
  const SimResult result = simulate_plan(std::move(b).build(), cluster, {});
  Sent out;
  for (size_t k = 0; k < s.size(); ++k) {
    out.start.push_back(result.timings[s[k]].start_ns);
    out.end.push_back(result.timings[s[k]].end_ns);
    out.arrived.push_back(result.timings[r[k]].end_ns);
  }
  return out;
}

TEST(DesBurst, AFullBucketTakesItsBytesAtOnceAndTheRestMovesAtTheBandwidth) {
  // 1e6 B: 2.5e5 at once, 7.5e5 at 1 B/ns: 750 us; its recv 50 us later.
  const Sent one = sends({1e6}, 0, 2.5e5);
  EXPECT_EQ(one.end[0], 750 * kUs);
  EXPECT_EQ(one.arrived[0], 800 * kUs);
  // A message the bucket holds whole crosses at once: the latency alone.
  const Sent small = sends({1e5}, 0, 2.5e5);
  EXPECT_EQ(small.end[0], 0);
  EXPECT_EQ(small.arrived[0], 50 * kUs);
  const Sent none = sends({1e6}, 0, 0);  // no bucket: all of it at 1 B/ns
  EXPECT_EQ(none.end[0], 1000 * kUs);
}

// Only a bucket on the path's slowest port lets bytes across at once: with
// a bucket of 2e6 B on the machines' own links (10 B/ns) and none on the
// link between them (1 B/ns), a send of 1e6 B between the machines moves
// at 1 B/ns: 1000 us, its recv 50 us later.
TEST(DesBurst, ABucketOffThePathsSlowestPortLetsNothingAcrossAtOnce) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId s = b.add(send_op(0, 1, 1e6));
  const OpId r = b.add(recv_op(1, 0, s));
  Cluster cluster = simple_cluster(2, 1);
  cluster.intra_link.burst_bytes = 2e6;
  const SimResult result = simulate_plan(std::move(b).build(), cluster, {});
  EXPECT_EQ(result.timings[s].end_ns, 1000 * kUs);
  EXPECT_EQ(result.timings[r].end_ns, 1050 * kUs);
}

TEST(DesBurst, TheBucketRefillsAtTheBandwidthWhileTheLinkIsIdle) {
  // The first send empties the bucket (ends at 750 us). After no gap the
  // second finds it empty: 1e6 B at 1 B/ns, to 1750 us. After a 100 us gap,
  // 1e5 B are back: the second moves 9e5 B from 850 us, to 1750 us.
  const Sent back_to_back = sends({1e6, 1e6}, 0, 2.5e5);
  EXPECT_EQ(back_to_back.start[1], 750 * kUs);
  EXPECT_EQ(back_to_back.end[1], 1750 * kUs);
  const Sent after_gap = sends({1e6, 1e6}, 100e-6, 2.5e5);
  EXPECT_EQ(after_gap.start[1], 850 * kUs);
  EXPECT_EQ(after_gap.end[1], 1750 * kUs);
  // After a gap longer than the bucket takes to fill (250 us), it is full
  // again and no fuller: 1e6 B from 1750 us end at 1750 + 750 us.
  const Sent after_long_gap = sends({1e6, 1e6}, 1e-3, 2.5e5);
  EXPECT_EQ(after_long_gap.start[1], 1750 * kUs);
  EXPECT_EQ(after_long_gap.end[1], 2500 * kUs);
}

}  // namespace
}  // namespace trainsim
