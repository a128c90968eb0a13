// A collective across machines and the flows on its NICs: while it runs, its
// links' bytes take their share of each NIC's bandwidth (those bytes' time
// at the bandwidth over its own time), and the flows there share the rest,
// never less than an equal share beside it. simple_cluster(2, 2): the link
// between the machines 1 B/ns and 50 us, t_sync 20 us, reduction 50 B/ns.
#include <gtest/gtest.h>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::collective_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;  // nanoseconds

struct Ends {
  SimTime allreduce = 0, send = 0;
};

// Worker 1 sends 1e6 B to worker 3 on the other machine while workers 0 and
// 2 (one per machine) AllReduce `bytes` by the ring; both start at 0.
Ends send_beside_allreduce(double bytes) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t group = b.group({0, 2});
  const OpId a0 = b.add(collective_op(0, OpKind::kAllReduce, group, bytes));
  b.add(collective_op(2, OpKind::kAllReduce, group, bytes));
  const OpId s = b.add(send_op(1, 3, 1e6));
  b.add(recv_op(3, 1, s));
  const SimResult result = simulate_plan(std::move(b).build(), simple_cluster(2, 2), {});
  return {result.timings[a0].end_ns, result.timings[s].end_ns};
}

TEST(DesNicShare, ACollectivesLinkBytesTakeTheirShareOfTheNicsFromTheFlowsThere) {
  // AllReduce of 1e4 B over 2 members: 2·50 us + 1e4 B·1 ns + 5e3 B / 50 B/ns
  // + 20 us t_sync = 130.1 us, its links carrying 1e4 B (10 us): a share of
  // 10/130.1. The send moves at 1 − 10/130.1 B/ns until 130.1 us (120.1e3 B),
  // then the other 879.9e3 B at 1 B/ns: it ends at 1010 us, the AllReduce's
  // 10 us of bytes later than alone.
  const Ends small = send_beside_allreduce(1e4);
  EXPECT_EQ(small.allreduce, 130100);
  EXPECT_NEAR(static_cast<double>(small.send), 1010 * kUs, 1.0);
  // AllReduce of 1e6 B: 100 + 1000 + 10 + 20 = 1130 us, its bytes' 1000 us a
  // share of 0.885: the send keeps an equal share beside it, 0.5 B/ns to
  // 1130 us (565e3 B), then 435e3 B at 1 B/ns: it ends at 1565 us.
  const Ends large = send_beside_allreduce(1e6);
  EXPECT_EQ(large.allreduce, 1130 * kUs);
  EXPECT_NEAR(static_cast<double>(large.send), 1565 * kUs, 1.0);
}

// Two AllReduces of 1e6 B at once, workers 0 and 2 and workers 1 and 3,
// both across the one pair of NICs: each alone 1130 us, its bytes a share
// of 1000/1130 of the NICs; together the shares add to 1000/565, so each
// runs at 565/1000 of its rate: 1130 · 1000/565 = 2000 us.
TEST(DesNicShare, CollectivesOnTheSameNicsShareItsBandwidth) {
  PlanBuilder b("test", 4, 1, 1);
  const int32_t left = b.group({0, 2}), right = b.group({1, 3});
  const OpId a = b.add(collective_op(0, OpKind::kAllReduce, left, 1e6));
  b.add(collective_op(2, OpKind::kAllReduce, left, 1e6));
  const OpId c = b.add(collective_op(1, OpKind::kAllReduce, right, 1e6));
  b.add(collective_op(3, OpKind::kAllReduce, right, 1e6));
  const SimResult together = simulate_plan(std::move(b).build(), simple_cluster(2, 2), {});
  EXPECT_NEAR(static_cast<double>(together.timings[a].end_ns), 2000 * kUs, 2.0);
  EXPECT_NEAR(static_cast<double>(together.timings[c].end_ns), 2000 * kUs, 2.0);
  // One of them four times smaller (250e3 B: 100 + 250 + 2.5 + 20 = 372.5
  // us, a share of 250/372.5): both run at 1/(1000/1130 + 250/372.5) until
  // the small one ends, then the large one alone at its full rate.
  PlanBuilder u("test", 4, 1, 1);
  const int32_t l2 = u.group({0, 2}), r2 = u.group({1, 3});
  const OpId big = u.add(collective_op(0, OpKind::kAllReduce, l2, 1e6));
  u.add(collective_op(2, OpKind::kAllReduce, l2, 1e6));
  const OpId small = u.add(collective_op(1, OpKind::kAllReduce, r2, 250e3));
  u.add(collective_op(3, OpKind::kAllReduce, r2, 250e3));
  const SimResult uneven = simulate_plan(std::move(u).build(), simple_cluster(2, 2), {});
  const double rate = 1 / (1000.0 / 1130 + 250.0 / 372.5);
  const double small_end = 372.5 / rate;                         // us
  const double big_end = small_end + (1130 - small_end * rate);  // the rest at full rate
  EXPECT_NEAR(static_cast<double>(uneven.timings[small].end_ns), small_end * kUs, 2.0);
  EXPECT_NEAR(static_cast<double>(uneven.timings[big].end_ns), big_end * kUs, 2.0);
}

}  // namespace
}  // namespace trainsim
