// Sends into a send buffer (LinkSpec::send_buffer_bytes): a send's stream
// goes on once no more than the buffer's bytes of its message are left to
// move, while the message still arrives when all of it has. Clusters are
// simple_cluster's round numbers: intra link 10 B/ns and 10 us, inter link
// 1 B/ns and 50 us.
#include <gtest/gtest.h>

#include <vector>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

constexpr SimTime kUs = 1000;  // nanoseconds

struct TwoSends {
  OpId big, small, big_recv, small_recv;
  SimResult r;
};

// 1e6 B then 1e5 B from worker 0 (machine 0) to worker 1 (machine 1), one stream.
TwoSends two_sends(double buffer_bytes) {
  PlanBuilder b("test", 2, 1, 1);
  TwoSends t{};
  t.big = b.add(send_op(0, 1, 1e6));
  t.small = b.add(send_op(0, 1, 1e5));
  t.big_recv = b.add(recv_op(1, 0, t.big));
  t.small_recv = b.add(recv_op(1, 0, t.small));
  Cluster cluster = simple_cluster(2, 1);
  cluster.inter_link.send_buffer_bytes = buffer_bytes;
  t.r = simulate_plan(std::move(b).build(), cluster, {});
  return t;
}

TEST(DesSendBuffer, TheStreamGoesOnWhenOnlyTheBufferIsLeftAndTheMessageArrivesWhole) {
  const TwoSends t = two_sends(2.5e5);
  // The 1e6 B send alone at the NIC's 1 B/ns has 2.5e5 B left at 750 us:
  // the small send starts then, and fits its buffer. Both share the NIC at
  // 0.5 B/ns: the small one's 1e5 B end at 950 us, when the big one has
  // 1.5e5 B left, alone again at 1 B/ns: 1100 us. Its recv 50 us later, and
  // the small one's, behind it on the receiving stream, with it.
  EXPECT_EQ(t.r.timings[t.small].start_ns, 750 * kUs);
  EXPECT_EQ(t.r.timings[t.small].end_ns, 950 * kUs);
  EXPECT_EQ(t.r.timings[t.big].end_ns, 1100 * kUs);
  EXPECT_EQ(t.r.timings[t.big_recv].end_ns, 1150 * kUs);
  EXPECT_EQ(t.r.timings[t.small_recv].end_ns, 1150 * kUs);
}

TEST(DesSendBuffer, WithoutABufferASendHoldsItsStreamUntilItsMessageHasMoved) {
  const TwoSends t = two_sends(0);
  EXPECT_EQ(t.r.timings[t.small].start_ns, 1000 * kUs);
  EXPECT_EQ(t.r.timings[t.small].end_ns, 1100 * kUs);
  EXPECT_EQ(t.r.timings[t.big_recv].end_ns, 1050 * kUs);
}

TEST(DesSendBuffer, MessagesThatFitAllStartAtOnceAndShareTheLink) {
  for (const double buffer : {0.0, 1e5}) {
    PlanBuilder b("test", 2, 1, 1);
    std::vector<OpId> sends;
    for (int k = 0; k < 3; ++k) sends.push_back(b.add(send_op(0, 1, 1e5)));
    for (const OpId s : sends) b.add(recv_op(1, 0, s));
    Cluster cluster = simple_cluster(1, 2);
    cluster.intra_link.send_buffer_bytes = buffer;  // within a machine, its intra link's
    const SimResult r = simulate_plan(std::move(b).build(), cluster, {});
    for (int k = 0; k < 3; ++k) {
      const auto& timing = r.timings[sends[static_cast<size_t>(k)]];
      if (buffer > 0) {  // all three on the 10 B/ns ports at once: 3e5 B by 30 us
        EXPECT_EQ(timing.start_ns, 0);
        EXPECT_EQ(timing.end_ns, 30 * kUs);
      } else {  // one after another, 10 us each
        EXPECT_EQ(timing.start_ns, k * 10 * kUs);
        EXPECT_EQ(timing.end_ns, (k + 1) * 10 * kUs);
      }
    }
  }
}

}  // namespace
}  // namespace trainsim
