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

}  // namespace
}  // namespace trainsim
