// dp-ps plan: gradients through device 0 (pushes one after another, its
// update, weights back) or through host memory (copies, one host sum, copies
// back, every device updates).
#include <gtest/gtest.h>

#include <algorithm>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_text;
using testing_fixtures::two_layer_profile;

bool depends_on(const Op& op, OpId dep) { return std::find(op.deps.begin(), op.deps.end(), dep) != op.deps.end(); }

TEST(DpPsPlan, DeviceServerTakesPushesInTurnUpdatesAndSendsWeightsBack) {
  const Plan plan = generate("dp-ps", two_layer_profile(), simple_cluster(1, 4), {}, 2);
  const std::vector<OpId> sends = ids_of(plan, OpKind::kSend, -1, 1);
  ASSERT_EQ(sends.size(), 6u);  // 3 pushes into worker 0, 3 sends of weights out of it
  for (int32_t k = 0; k < 3; ++k) {
    const Op& push = plan.ops[sends[k]];
    EXPECT_EQ(push.worker, k + 1);
    EXPECT_EQ(push.peer, 0);
    EXPECT_DOUBLE_EQ(push.bytes, 3e6);
    EXPECT_TRUE(depends_on(push, ids_of(plan, OpKind::kBackward, k + 1, 1).at(0)));
    if (k > 0) {
      EXPECT_TRUE(depends_on(push, sends[k - 1])) << "pushes go one after another";
    }
  }
  // Device 0 sums the 3 other gradients and updates: 3 · 3e6 B / 50e9 B/s
  // = 1.8e-4 s plus update_s(3 MB) = 1.5e-4 s.
  const std::vector<OpId> updates = ids_of(plan, OpKind::kUpdate, -1, 1);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(plan.ops[updates[0]].worker, 0);
  EXPECT_NEAR(plan.ops[updates[0]].work_s, 3.3e-4, 1e-15);
  EXPECT_EQ(plan.ops[updates[0]].deps.size(), 3u);
  for (int32_t k = 0; k < 3; ++k) {
    const Op& back = plan.ops[sends[3 + k]];
    EXPECT_EQ(back.worker, 0);
    EXPECT_EQ(back.peer, k + 1);
    EXPECT_EQ(back.deps, std::vector<OpId>{updates[0]});
  }
  // The others' next forward waits for the weights they receive.
  const OpId weights = ids_of(plan, OpKind::kRecv, 2, 0).back();
  EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kForward, 2, 1).at(0)].deps, std::vector<OpId>{weights});
  EXPECT_EQ(stream_text(plan, 2, StreamKind::kCompute), "forward0 backward0 forward1 backward1");
  // Device 0 keeps a receive buffer per peer: 9 MB + 3 · 3 MB.
  EXPECT_DOUBLE_EQ(plan.workers[0].static_bytes, 18e6);
  EXPECT_DOUBLE_EQ(plan.workers[1].static_bytes, 9e6);
}

TEST(DpPsPlan, HostServerCopiesSumsOnTheHostAndCopiesBack) {
  const Plan plan = generate("dp-ps", two_layer_profile(), simple_cluster(1, 4), {{"server", "host"}}, 2);
  const std::vector<OpId> sums = ids_of(plan, OpKind::kHostAccumulate, -1, 1);
  ASSERT_EQ(sums.size(), 1u);
  const Op& sum = plan.ops[sums[0]];
  EXPECT_EQ(sum.worker, 0);
  EXPECT_EQ(sum.stream, StreamKind::kHost);
  EXPECT_DOUBLE_EQ(sum.bytes, 4 * 3e6);  // N · M
  EXPECT_EQ(sum.deps, ids_of(plan, OpKind::kCopyToHost, -1, 1));
  for (int32_t w = 0; w < 4; ++w) {
    const OpId back = ids_of(plan, OpKind::kCopyToDevice, w, 1).at(0);
    EXPECT_EQ(plan.ops[back].deps, std::vector<OpId>{sums[0]});
    EXPECT_DOUBLE_EQ(plan.ops[back].bytes, 3e6);
    EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, w, 1).at(0)].deps, std::vector<OpId>{back});
    EXPECT_EQ(stream_text(plan, w, StreamKind::kCompute), "forward0 backward0 update0 forward1 backward1 update1");
  }
  EXPECT_TRUE(ids_of(plan, OpKind::kSend).empty());
}

TEST(DpPsPlan, HostServerRelaysOtherMachinesThroughMachineZeroInTurn) {
  // 2 × 2: workers 2 and 3 stage through their own host, then relay to
  // machine 0 one after another, and receive the sum the same way.
  const Plan plan = generate("dp-ps", two_layer_profile(), simple_cluster(2, 2), {{"server", "host"}}, 1);
  const std::vector<OpId> sends = ids_of(plan, OpKind::kSend);
  ASSERT_EQ(sends.size(), 4u);
  EXPECT_EQ(plan.ops[sends[0]].worker, 2);
  EXPECT_EQ(plan.ops[sends[1]].worker, 3);
  EXPECT_TRUE(depends_on(plan.ops[sends[1]], sends[0]));
  EXPECT_TRUE(depends_on(plan.ops[sends[1]], ids_of(plan, OpKind::kCopyToHost, 3).at(0)));
  const OpId sum = ids_of(plan, OpKind::kHostAccumulate).at(0);
  EXPECT_TRUE(depends_on(plan.ops[sum], ids_of(plan, OpKind::kRecv, 0).at(1)));
  EXPECT_EQ(plan.ops[sends[2]].peer, 2);
  EXPECT_EQ(plan.ops[sends[3]].peer, 3);
  EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kCopyToDevice, 3).at(0)].deps,
            std::vector<OpId>{ids_of(plan, OpKind::kRecv, 3).at(0)});
}

TEST(DpPsPlan, SimulatedIterationEqualsTheClosedFormWhereWorkersStartTogether) {
  const Profile profile = two_layer_profile();
  // Host server on 1 × 4: 9.15 ms of compute + 2 copies of 1e-5 + 3e6/1e10 =
  // 3.1e-4 s + the host sum of 4 · 3e6 B at 20 GB/s = 6e-4 s: 10.37 ms.
  const Cluster four = simple_cluster(1, 4);
  const Plan host = generate("dp-ps", profile, four, {{"server", "host"}}, 8);
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("dp-ps", profile, four, {{"server", "host"}}), 10.37e-3, 1e-12);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(host, four), 10.37e-3, 1e-4);
  // Device server on 1 × 2: 9.15 ms + 2 · (1e-5 + 3e6/1e10) + 3e6/50e9 = 9.83 ms.
  const Cluster two = simple_cluster(1, 2);
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("dp-ps", profile, two), 9.83e-3, 1e-12);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(generate("dp-ps", profile, two, {}, 8), two), 9.83e-3, 1e-4);
}

TEST(DpPsPlan, DeviceServerLetsWorkersServedFirstStartTheNextIterationSooner) {
  // The closed form has every worker start together: 9.15 ms + 6 · 3.1e-4 +
  // 3 · 6e-5 = 11.19 ms on 1 × 4. In the plan, worker k gets the weights
  // k · c after device 0's update (c = 3.1e-4 s per send) and pushes k · c
  // after that plus F + B, so the pushes no longer queue: from one server
  // update's end to the next, c + F + B + 3c (pushes) + sum and update =
  // 9e-3 + 4 · 3.1e-4 + 1.8e-4 + 1.5e-4 = 10.57 ms, (N-2)·c below.
  const Cluster four = simple_cluster(1, 4);
  EXPECT_NEAR(testing_fixtures::analytic_iteration_s("dp-ps", two_layer_profile(), four), 11.19e-3, 1e-12);
  const Plan plan = generate("dp-ps", two_layer_profile(), four, {}, 10);
  EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, four), 10.57e-3, 1e-4);
}

TEST(DpPsPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {{"workers", "3"}, {"server", "host"}};
  EXPECT_EQ(generate("dp-ps", two_layer_profile(), simple_cluster(1, 4), settings).config,
            testing_fixtures::run_strategy("dp-ps", two_layer_profile(), simple_cluster(1, 4), settings).config);
  EXPECT_EQ(generate("dp-ps", two_layer_profile(), simple_cluster(1, 4)).config["server"], "device");
  EXPECT_THROW(generate("dp-ps", two_layer_profile(), simple_cluster(1, 4), {{"server", "gpu"}}), InputError);
  EXPECT_THROW(generate("dp-ps", two_layer_profile(), simple_cluster(1, 4), {{"algorithm", "ring"}}), InputError);
}

TEST(DpPsPlan, ValidatesOnFixturesAndEveryPreset) {
  testing_fixtures::expect_plans_everywhere("dp-ps");
  testing_fixtures::expect_plans_everywhere("dp-ps", {{"server", "host"}});
}

}  // namespace
}  // namespace trainsim
