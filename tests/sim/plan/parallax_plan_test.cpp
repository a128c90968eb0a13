// parallax plan: dense gradients by AllReduce, sparse ones through one
// server per machine (with or without local aggregation), `ps` and `ar`.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/error.hpp"
#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::generate;
using testing_fixtures::ids_of;
using testing_fixtures::layer;
using testing_fixtures::simple_cluster;
using testing_fixtures::stream_text;

// As Parallax's cost tests: an embedding of 100 MB with 1% of its rows
// touched per iteration (αw = 1 MB) and a dense layer of 4 MB; forward and
// backward 1 ms each, activations 1 MB each.
Profile language_model() {
  Profile p = testing_fixtures::chain_profile(0, 0, 0, 0, 0);
  LayerProfile embedding = layer("embedding", {"input"}, 1e-3, 1e-3, 100e6, 1e6);
  embedding.sparse = true;
  embedding.sparsity = 0.01;
  p.layers.push_back(embedding);
  p.layers.push_back(layer("lstm", {"embedding"}, 1e-3, 1e-3, 4e6, 1e6));
  return p;
}

bool depends_on(const Op& op, OpId dep) { return std::find(op.deps.begin(), op.deps.end(), dep) != op.deps.end(); }

// Sends of `plan` as (from, to, bytes).
std::vector<std::tuple<int32_t, int32_t, double>> sends_of(const Plan& plan) {
  std::vector<std::tuple<int32_t, int32_t, double>> sends;
  for (OpId id : ids_of(plan, OpKind::kSend))
    sends.emplace_back(plan.ops[id].worker, plan.ops[id].peer, plan.ops[id].bytes);
  return sends;
}

TEST(ParallaxPlan, HybridOnOneMachineAllReducesDenseAndStagesSparseRowsOnTheHost) {
  const Plan plan = generate("parallax", language_model(), simple_cluster(1, 4), {}, 2);
  EXPECT_TRUE(ids_of(plan, OpKind::kSend).empty());  // the one server is this machine's host
  for (int32_t w = 0; w < 4; ++w) {
    const OpId allreduce = ids_of(plan, OpKind::kAllReduce, w, 1).at(0);
    EXPECT_DOUBLE_EQ(plan.ops[allreduce].bytes, 4e6);
    EXPECT_EQ(plan.ops[allreduce].deps, ids_of(plan, OpKind::kBackward, w, 1));
    const OpId push = ids_of(plan, OpKind::kCopyToHost, w, 1).at(0);
    EXPECT_DOUBLE_EQ(plan.ops[push].bytes, 1e6);                   // αw
    EXPECT_EQ(plan.ops[push].deps, std::vector<OpId>{allreduce});  // after the AllReduce: their times add
    const OpId pull = ids_of(plan, OpKind::kCopyToDevice, w, 1).at(0);
    EXPECT_EQ(plan.ops[pull].deps, ids_of(plan, OpKind::kServerStep, -1, 1));  // after the server's step
    const Op& update = plan.ops[ids_of(plan, OpKind::kUpdate, w, 1).at(0)];
    EXPECT_EQ(update.deps, std::vector<OpId>{pull});
    EXPECT_NEAR(update.work_s, 2e-4, 1e-15);  // its dense 4 MB, 5 passes at 100 GB/s; the servers step the table
    EXPECT_EQ(stream_text(plan, w, StreamKind::kCompute), "forward0 backward0 update0 forward1 backward1 update1");
  }
  // The server, on worker 0's host, steps the table once it has every push:
  // 2 · 4 pushes of 1 MB at 20 GB/s, and the step of 1 MB (5e-5 s) scaled to
  // the union of 4 workers' rows, (1 − 0.99⁴)/0.01 = 3.940399 times.
  const std::vector<OpId> steps = ids_of(plan, OpKind::kServerStep, -1, 1);
  ASSERT_EQ(steps.size(), 1u);
  const Op& step = plan.ops[steps[0]];
  EXPECT_EQ(step.worker, 0);
  EXPECT_EQ(step.stream, StreamKind::kHost);
  EXPECT_EQ(std::make_pair(step.first_layer, step.last_layer), std::make_pair(0, 0));
  EXPECT_EQ(step.deps, ids_of(plan, OpKind::kCopyToHost, -1, 1));
  EXPECT_NEAR(step.work_s, 2 * 4e6 / 20e9 + 5e-5 * 3.940399, 1e-15);
  // The servers keep the sparse table: weights and gradients of 4 + 1 MB, momentum of 4 MB.
  EXPECT_DOUBLE_EQ(plan.workers[0].static_bytes, 14e6);
}

TEST(ParallaxPlan, WithoutLocalAggregationEachWorkerPushesItsShareToEveryRemoteServer) {
  // 2 × 2: servers on workers 0 and 2. Each worker sends αw/m = 0.5 MB to the
  // other machine's server, which sends the same back once it holds every push.
  const Plan plan = generate("parallax", language_model(), simple_cluster(2, 2), {{"local_aggregation", "false"}}, 1);
  using Send = std::tuple<int32_t, int32_t, double>;
  EXPECT_EQ(
      sends_of(plan),
      (std::vector<Send>{
          {0, 2, 5e5}, {1, 2, 5e5}, {2, 0, 5e5}, {3, 0, 5e5}, {0, 2, 5e5}, {0, 3, 5e5}, {2, 0, 5e5}, {2, 1, 5e5}}));
  const std::vector<OpId> sends = ids_of(plan, OpKind::kSend);
  const std::vector<OpId> at_server_0 = ids_of(plan, OpKind::kRecv, 0);
  // The pull from 0 waits for its server's step, which waits for 2's push and 1's copy.
  const OpId step_0 = ids_of(plan, OpKind::kServerStep, 0).at(0);
  EXPECT_EQ(plan.ops[sends[4]].deps, std::vector<OpId>{step_0});
  EXPECT_TRUE(depends_on(plan.ops[step_0], at_server_0[0]));
  EXPECT_TRUE(depends_on(plan.ops[step_0], ids_of(plan, OpKind::kCopyToHost, 1).at(0)));
  EXPECT_EQ(ids_of(plan, OpKind::kServerStep, 2).size(), 1u);  // and the other machine's server steps its half
  const Op& update = plan.ops[ids_of(plan, OpKind::kUpdate, 3).at(0)];
  EXPECT_TRUE(depends_on(update, ids_of(plan, OpKind::kRecv, 3).at(0)));
  EXPECT_TRUE(depends_on(update, ids_of(plan, OpKind::kCopyToDevice, 3).at(0)));
}

TEST(ParallaxPlan, LocalAggregationSendsEachMachinesUnionOnceFromItsServer) {
  // The union of 2 workers' rows: 100e6 · (1 - 0.99²) = 1.99 MB; each server
  // sends half of it to the other after its machine's copies, and back.
  const Plan plan = generate("parallax", language_model(), simple_cluster(2, 2), {}, 1);
  const std::vector<std::tuple<int32_t, int32_t, double>> sends = sends_of(plan);
  ASSERT_EQ(sends.size(), 4u);
  for (const auto& [from, to, bytes] : sends) {
    EXPECT_TRUE(from == 0 || from == 2);
    EXPECT_TRUE(to == 0 || to == 2);
    EXPECT_NEAR(bytes, 0.995e6, 1e-3);
  }
  const Op& push = plan.ops[ids_of(plan, OpKind::kSend, 2).at(0)];
  EXPECT_EQ(push.deps, (std::vector<OpId>{ids_of(plan, OpKind::kCopyToHost, 2).at(0),
                                          ids_of(plan, OpKind::kCopyToHost, 3).at(0)}));
  // Worker 3's rows come back through its machine's host once the other server's share arrived.
  EXPECT_TRUE(
      depends_on(plan.ops[ids_of(plan, OpKind::kCopyToDevice, 3).at(0)], ids_of(plan, OpKind::kRecv, 2).back()));
}

TEST(ParallaxPlan, PsModeSendsDenseSharesToTheServersToo) {
  // Dense shares 4 MB / 2 per worker and remote server; sparse aggregated.
  const Plan plan = generate("parallax", language_model(), simple_cluster(2, 2), {{"mode", "ps"}}, 1);
  EXPECT_TRUE(ids_of(plan, OpKind::kAllReduce).empty());
  EXPECT_DOUBLE_EQ(std::get<2>(sends_of(plan).front()), 2e6);
  EXPECT_DOUBLE_EQ(plan.ops[ids_of(plan, OpKind::kCopyToHost, 1).at(0)].bytes, 5e6);  // dense + αw
  EXPECT_EQ(sends_of(plan).size(), 4u + 4u + 4u);  // 4 dense pushes, 2 + 2 aggregated sparse, 4 dense pulls
}

TEST(ParallaxPlan, ArModeGathersTheSparseRowsAroundTheRing) {
  // N - 1 = 3 steps of αw = 1 MB from each worker to the next, after the dense AllReduce.
  const Plan plan = generate("parallax", language_model(), simple_cluster(1, 4), {{"mode", "ar"}}, 1);
  const auto sends = sends_of(plan);
  ASSERT_EQ(sends.size(), 12u);
  for (const auto& [from, to, bytes] : sends) {
    EXPECT_EQ(to, (from + 1) % 4);
    EXPECT_DOUBLE_EQ(bytes, 1e6);
  }
  const std::vector<OpId> from_1 = ids_of(plan, OpKind::kSend, 1);
  EXPECT_EQ(plan.ops[from_1[0]].deps, ids_of(plan, OpKind::kAllReduce, 1));
  EXPECT_EQ(plan.ops[from_1[1]].deps, std::vector<OpId>{ids_of(plan, OpKind::kRecv, 1).at(0)});
  // The update waits for the last block and for the worker's own sends,
  // which read the rows it is about to apply.
  std::vector<OpId> waits = from_1;
  waits.push_back(ids_of(plan, OpKind::kRecv, 1).at(2));
  EXPECT_EQ(plan.ops[ids_of(plan, OpKind::kUpdate, 1).at(0)].deps, waits);
}

TEST(ParallaxPlan, SimulatedIterationOnOneMachine) {
  // 1 × 4: compute 4 ms. Dense ring AllReduce(4 MB) = 6e-5 + 1.5·4e6·1e-10 +
  // 0.75·4e6·2e-11 = 7.2e-4, + t_sync = 7.4e-4. Servers: push and pull over
  // the host link, 1e-5 + G/1e10 each: G = αw = 1 MB (hybrid) gives 2.2e-4;
  // G = 5 MB (ps) 1.02e-3. Server steps: the table's 2·4·1 MB / 20 GB/s +
  // 5e-5·3.940399 = 5.9701995e-4; the dense variables' (ps) 2·4·4 MB / 20 GB/s
  // + 2e-4 = 1.8e-3. The worker's update: its dense 4 MB, 2e-4 (hybrid), none
  // (ps: the servers hold everything), 2e-4 + 4 workers' rows 4·5e-5 (ar).
  // hybrid: 4e-3 + 2e-4 + 7.4e-4 + 2.2e-4 + 5.9701995e-4 = 5.75701995 ms;
  // ps: 4e-3 + 1.02e-3 + 5.9701995e-4 + 1.8e-3 = 7.41701995 ms.
  // ar: the allgather's 3 steps of 1e-5 + 1e6/1e10 = 3.3e-4 equal
  // allgather_ring_s, but as sends they carry no t_sync: 4e-3 + 4e-4 + 7.4e-4
  // + 3.3e-4 = 5.47 ms simulated, 2e-5 under the closed form's 5.49 ms.
  const Cluster four = simple_cluster(1, 4);
  const std::vector<std::tuple<std::string, double, double>> cases = {
      {"hybrid", 5.75701995e-3, 5.75701995e-3}, {"ps", 7.41701995e-3, 7.41701995e-3}, {"ar", 5.49e-3, 5.47e-3}};
  for (const auto& [mode, analytic_s, simulated_s] : cases) {
    EXPECT_NEAR(testing_fixtures::analytic_iteration_s("parallax", language_model(), four, {{"mode", mode}}),
                analytic_s, 1e-12);
    const Plan plan = generate("parallax", language_model(), four, {{"mode", mode}}, 8);
    EXPECT_NEAR(testing_fixtures::simulated_iteration_s(plan, four), simulated_s, 1e-6) << mode;
  }
}

TEST(ParallaxPlan, ReadsTheCostModelsKeysAndRejectsOthers) {
  const testing_fixtures::Settings settings = {
      {"workers", "3"}, {"algorithm", "tree"}, {"mode", "ps"}, {"local_aggregation", "false"}};
  EXPECT_EQ(generate("parallax", language_model(), simple_cluster(2, 2), settings).config,
            testing_fixtures::run_strategy("parallax", language_model(), simple_cluster(2, 2), settings).config);
  EXPECT_EQ(generate("parallax", language_model(), simple_cluster(2, 2)).config,
            testing_fixtures::run_strategy("parallax", language_model(), simple_cluster(2, 2)).config);
  EXPECT_THROW(generate("parallax", language_model(), simple_cluster(2, 2), {{"mode", "mpi"}}), InputError);
  EXPECT_THROW(generate("parallax", language_model(), simple_cluster(2, 2), {{"server", "host"}}), InputError);
}

TEST(ParallaxPlan, ValidatesOnFixturesAndEveryPreset) {
  for (const std::string mode : {"hybrid", "ps", "ar"}) {
    testing_fixtures::expect_plans_everywhere("parallax", {{"mode", mode}});
    testing_fixtures::expect_plans_everywhere("parallax", {{"mode", mode}, {"local_aggregation", "false"}});
    for (const Cluster& cluster : {simple_cluster(1, 4), simple_cluster(3, 2)}) {
      EXPECT_NO_THROW(generate("parallax", language_model(), cluster, {{"mode", mode}, {"workers", "3"}}));
      EXPECT_NO_THROW(generate("parallax", language_model(), cluster, {{"mode", mode}}));
    }
  }
}

}  // namespace
}  // namespace trainsim
