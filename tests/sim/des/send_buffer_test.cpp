// Sends into a send buffer (LinkSpec::send_buffer_bytes): a device's
// messages to one peer go in order, as over one TCP connection; a send's
// stream, and whatever else of its worker waits on it, goes on once no more
// than the buffer's bytes of its connection are left to move, while its
// message still arrives when all of it has. Clusters are
// simple_cluster's round numbers: intra link 10 B/ns and 10 us, inter link
// 1 B/ns and 50 us.
#include <gtest/gtest.h>

#include <utility>
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

struct TwoSends {
  OpId big, small, after, big_recv, small_recv;
  SimResult r;
};

// 1e6 B then 1e5 B from worker 0 (machine 0) to worker 1 (machine 1), one
// stream, then 1 us of work on that stream.
TwoSends two_sends(double buffer_bytes) {
  PlanBuilder b("test", 2, 1, 1);
  TwoSends t{};
  t.big = b.add(send_op(0, 1, 1e6));
  t.small = b.add(send_op(0, 1, 1e5));
  Op after = compute_op(0, 1e-6);
  after.stream = StreamKind::kSend;
  t.after = b.add(after);
  t.big_recv = b.add(recv_op(1, 0, t.big));
  t.small_recv = b.add(recv_op(1, 0, t.small));
  Cluster cluster = simple_cluster(2, 1);
  cluster.inter_link.send_buffer_bytes = buffer_bytes;
  t.r = simulate_plan(std::move(b).build(), cluster, {});
  return t;
}

TEST(DesSendBuffer, TheStreamGoesOnWhenOnlyTheBufferIsLeftAndTheMessageArrivesWhole) {
  const TwoSends t = two_sends(2.5e5);
  // The 1e6 B send alone at the NIC's 1 B/ns has 2.5e5 B left at 750 us: the
  // small send starts then, behind it on their connection. With its 1e5 B the
  // connection holds 3.5e5 B: it returns 1e5 B later, at 850 us, and the work
  // after it starts. The big message ends at 1000 us, the small one 100 us
  // later; each recv 50 us after its message.
  EXPECT_EQ(t.r.timings[t.small].start_ns, 750 * kUs);
  EXPECT_EQ(t.r.timings[t.after].start_ns, 850 * kUs);
  EXPECT_EQ(t.r.timings[t.big].end_ns, 1000 * kUs);
  EXPECT_EQ(t.r.timings[t.small].end_ns, 1100 * kUs);
  EXPECT_EQ(t.r.timings[t.big_recv].end_ns, 1050 * kUs);
  EXPECT_EQ(t.r.timings[t.small_recv].end_ns, 1150 * kUs);
}

TEST(DesSendBuffer, WithoutABufferASendHoldsItsStreamUntilItsMessageHasMoved) {
  const TwoSends t = two_sends(0);
  EXPECT_EQ(t.r.timings[t.small].start_ns, 1000 * kUs);
  EXPECT_EQ(t.r.timings[t.small].end_ns, 1100 * kUs);
  EXPECT_EQ(t.r.timings[t.after].start_ns, 1100 * kUs);
  EXPECT_EQ(t.r.timings[t.big_recv].end_ns, 1050 * kUs);
}

// A send of 1e6 B from worker 0 (machine 0) to worker 1 (machine 1), alone
// on its stream, and 1 us of work on each worker's compute stream that
// waits on it (as a pipeline's barrier waits on the iteration's last send):
// the send's end and each work's start.
struct WaitOnSend {
  SimTime send_end, own_start, peer_start;
};
WaitOnSend wait_on_send(double buffer_bytes) {
  PlanBuilder b("test", 2, 1, 1);
  const OpId send = b.add(send_op(0, 1, 1e6));
  const OpId own = b.add(compute_op(0, 1e-6, {send}));
  const OpId recv = b.add(recv_op(1, 0, send));
  const OpId peer = b.add(compute_op(1, 1e-6, {recv}));
  Cluster cluster = simple_cluster(2, 1);
  cluster.inter_link.send_buffer_bytes = buffer_bytes;
  const SimResult r = simulate_plan(std::move(b).build(), cluster, {});
  return {r.timings[send].end_ns, r.timings[own].start_ns, r.timings[peer].start_ns};
}

TEST(DesSendBuffer, WhatTheSenderRunsAfterTheSendGoesOnWhenTheSendReturnsOnAnyStream) {
  // 1e6 B at 1 B/ns: 2.5e5 B left at 750 us, when the send returns and the
  // sender's work after it starts; the message has moved at 1000 us and
  // the peer's work starts after its recv, 50 us later.
  const WaitOnSend posted = wait_on_send(2.5e5);
  EXPECT_EQ(posted.own_start, 750 * kUs);
  EXPECT_EQ(posted.send_end, 1000 * kUs);
  EXPECT_EQ(posted.peer_start, 1050 * kUs);
  const WaitOnSend held = wait_on_send(0);  // no buffer: both wait for the whole message
  EXPECT_EQ(held.own_start, 1000 * kUs);
  EXPECT_EQ(held.peer_start, 1050 * kUs);
}

// Three sends of 1e5 B on one stream within a machine (10 B/ns), then 1 us
// of work on that stream: each send's start and end, then the work's.
std::vector<std::pair<SimTime, SimTime>> three_sends(std::vector<int32_t> peers, double buffer_bytes) {
  PlanBuilder b("test", 4, 1, 1);
  std::vector<OpId> sends;
  for (const int32_t peer : peers) sends.push_back(b.add(send_op(0, peer, 1e5)));
  Op after = compute_op(0, 1e-6);
  after.stream = StreamKind::kSend;
  const OpId work = b.add(after);
  for (size_t k = 0; k < sends.size(); ++k) b.add(recv_op(peers[k], 0, sends[k]));
  Cluster cluster = simple_cluster(1, 4);
  cluster.intra_link.send_buffer_bytes = buffer_bytes;  // within a machine, its intra link's
  const SimResult r = simulate_plan(std::move(b).build(), cluster, {});
  std::vector<std::pair<SimTime, SimTime>> out;
  for (const OpId s : sends) out.emplace_back(r.timings[s].start_ns, r.timings[s].end_ns);
  out.emplace_back(r.timings[work].start_ns, r.timings[work].end_ns);
  return out;
}

TEST(DesSendBuffer, MessagesToSeveralPeersThatFitAllStartAtOnceAndShareTheLink) {
  // All three on device 0's egress at once: 3e5 B by 30 us; the work after
  // them at once too.
  const auto shared = three_sends({1, 2, 3}, 1e5);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(shared[k], std::make_pair(SimTime(0), SimTime(30 * kUs)));
  EXPECT_EQ(shared[3].first, 0);
  const auto alone = three_sends({1, 2, 3}, 0);  // one after another, 10 us each
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(alone[k], std::make_pair(SimTime(k * 10 * kUs), SimTime((k + 1) * 10 * kUs)));
  EXPECT_EQ(alone[3].first, 30 * kUs);
}

TEST(DesSendBuffer, OneConnectionsMessagesGoInOrderWhileItsBufferHoldsThem) {
  // To one peer, a buffer of 2e5 B: the first two return at once and the
  // third when the first has moved (10 us), when the work after it starts;
  // the messages move one after another.
  const auto sends = three_sends({1, 1, 1}, 2e5);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(sends[k], std::make_pair(SimTime(0), SimTime((k + 1) * 10 * kUs)));
  EXPECT_EQ(sends[3].first, 10 * kUs);
}

}  // namespace
}  // namespace trainsim
