// What a run sums up to: iteration ends, the median interval after warm-up,
// the measured window, each worker's breakdown of it (compute, exposed
// communication, idle on transfers, idle from imbalance), and the Prediction.
#include "sim/des/summary.hpp"

#include <gtest/gtest.h>

#include "model/error.hpp"
#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::collective_op;
using testing_fixtures::compute_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

// One worker, one compute op per iteration with these durations in ms.
Plan iteration_chain(const std::vector<double>& work_ms) {
  PlanBuilder b("test", 1, static_cast<int32_t>(work_ms.size()), 32);
  for (size_t i = 0; i < work_ms.size(); ++i) b.add(compute_op(0, work_ms[i] * 1e-3, {}, static_cast<int32_t>(i)));
  return std::move(b).build();
}

void expect_worker_sums_to_window(const SimResult& r) {
  for (const WorkerResult& w : r.workers) EXPECT_NEAR(w.breakdown.total_s(), r.window_s, 1e-12);
  EXPECT_NEAR(r.breakdown.total_s(), r.iteration_s, 1e-12);
}

TEST(DesSummary, IterationTimeIsTheMedianIntervalBetweenWarmUpAndDrain) {
  // Ends at 5, 6, 8, 10, 13, 15 ms. Six iterations: warm-up max(1, 6/5) = 1,
  // and as many left out as drain at the end (5 remain, more than 2 × 1).
  // Intervals of iterations 1..4: 1, 2, 2, 3 -> median (2 + 2) / 2 = 2.
  const SimResult r = simulate_plan(iteration_chain({5, 1, 2, 2, 3, 2}), simple_cluster(1, 1), {});
  EXPECT_EQ(r.warmup_iterations, 1);
  ASSERT_EQ(r.iteration_end_s.size(), 6u);
  EXPECT_DOUBLE_EQ(r.iteration_end_s[0], 5e-3);
  EXPECT_DOUBLE_EQ(r.iteration_end_s[5], 15e-3);
  EXPECT_DOUBLE_EQ(r.iteration_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.iteration_min_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.iteration_max_s, 3e-3);
  EXPECT_DOUBLE_EQ(r.window_s, 8e-3);  // [5, 13] ms
}

TEST(DesSummary, TenIterationsLeaveOutTwoOfWarmUpAndTwoOfDrain) {
  // Ends at 9, 18, 19, 20, 21, 22, 26, 30, 34, 38 ms. Warm-up max(1, 10/5) = 2,
  // drain 2: iterations 2..7 measured, intervals 1 1 1 1 4 4 ms -> median 1 ms.
  const SimResult r = simulate_plan(iteration_chain({9, 9, 1, 1, 1, 1, 4, 4, 4, 4}), simple_cluster(1, 1), {});
  EXPECT_EQ(r.warmup_iterations, 2);
  EXPECT_DOUBLE_EQ(r.iteration_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.iteration_max_s, 4e-3);
  EXPECT_DOUBLE_EQ(r.window_s, 12e-3);  // [18, 30] ms
}

TEST(DesSummary, IterationsEndingInGroupsAreMeasuredPerPeriod) {
  // A replicated input stage ends iterations in pairs: ends at 4, 4, 8, 8, 12,
  // 12, 16, 16, 20, 20, 24, 24 ms (period 2). Warm-up 12/5 = 2 and drain 2:
  // periods end at iterations 3, 5, 7, 9, each 4 ms for 2 iterations: 2 ms,
  // min and max alike (single intervals would alternate 4 and 0 ms).
  PlanBuilder b("test", 1, 12, 32);
  for (int32_t i = 0; i < 12; ++i) b.add(compute_op(0, i % 2 == 0 ? 4e-3 : 0.0, {}, i));
  b.set_iteration_period(2);
  const SimResult r = simulate_plan(std::move(b).build(), simple_cluster(1, 1), {});
  EXPECT_DOUBLE_EQ(r.iteration_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.iteration_min_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.iteration_max_s, 2e-3);
}

TEST(DesSummary, FewerThanThreeIterationsHaveNoWarmUp) {
  // Ends at 3 and 4 ms; intervals from the start: 3 and 1 -> median 2.
  const SimResult r = simulate_plan(iteration_chain({3, 1}), simple_cluster(1, 1), {});
  EXPECT_EQ(r.warmup_iterations, 0);
  EXPECT_DOUBLE_EQ(r.iteration_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.iteration_min_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.iteration_max_s, 3e-3);
  EXPECT_DOUBLE_EQ(r.window_s, 4e-3);
}

TEST(DesSummary, ASingleMeasuredIterationIsItsEndMinusTheWarmUpEnd) {
  SimOptions o;
  o.warmup_iterations = 1;
  // Ends at 3 and 4 ms: 4 - 3 = 1 ms.
  const SimResult r = simulate_plan(iteration_chain({3, 1}), simple_cluster(1, 1), o);
  EXPECT_DOUBLE_EQ(r.iteration_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.window_s, 1e-3);
  // Without warm-up, one iteration is its end.
  EXPECT_DOUBLE_EQ(simulate_plan(iteration_chain({3}), simple_cluster(1, 1), {}).iteration_s, 3e-3);
}

TEST(DesSummary, AWarmUpLeavingNothingMeasuredIsAnInputError) {
  SimOptions o;
  o.warmup_iterations = 2;
  EXPECT_THROW(simulate_plan(iteration_chain({3, 1}), simple_cluster(1, 1), o), InputError);
}

TEST(DesSummary, WaitingOnARecvIsImbalanceUntilTheSendStartsThenTransfer) {
  // Worker 0: F 1 ms, then sends 1e6 B (10 + 100 us: 1.00 -> 1.11 ms).
  // Worker 1: X 0.5 ms, then G (1 ms) after the recv: 1.11 -> 2.11 ms.
  PlanBuilder b("test", 2, 1, 32);
  const OpId f = b.add(compute_op(0, 1e-3));
  const OpId s = b.add(send_op(0, 1, 1e6, {f}));
  b.add(compute_op(1, 0.5e-3));
  const OpId rv = b.add(recv_op(1, 0, s));
  b.add(compute_op(1, 1e-3, {rv}));
  const SimResult r = simulate_plan(std::move(b).build(), simple_cluster(1, 2), {});
  ASSERT_DOUBLE_EQ(r.window_s, 2.11e-3);  // one iteration, no warm-up: [0, 2.11] ms
  // Worker 1: compute 0.5 + 1; gap [0.5, 1.11]: [0.5, 1.0) the send had not
  // started (imbalance 0.5), [1.0, 1.11] bytes moving (transfer 0.11).
  const Breakdown& w1 = r.workers[1].breakdown;
  EXPECT_NEAR(w1.compute_s, 1.5e-3, 1e-12);
  EXPECT_NEAR(w1.idle_imbalance_s, 0.5e-3, 1e-12);
  EXPECT_NEAR(w1.idle_transfer_s, 0.11e-3, 1e-12);
  EXPECT_EQ(w1.exposed_comm_s, 0);
  // Worker 0: compute 1, then nothing to do until the window ends: 1.11 imbalance.
  const Breakdown& w0 = r.workers[0].breakdown;
  EXPECT_NEAR(w0.compute_s, 1e-3, 1e-12);
  EXPECT_NEAR(w0.idle_imbalance_s, 1.11e-3, 1e-12);
  expect_worker_sums_to_window(r);
}

TEST(DesSummary, AnAllReduceIsImbalanceUntilTheLastMemberThenExposedCommunication) {
  // Backward 1 ms on worker 0, 2 ms on worker 1; AllReduce of 1e6 B over {0,1}
  // (intra, p = 2: 2α 20 + nβ 100 + nγ/2 10 + t_sync 20 = 150 us: 2.00 -> 2.15
  // ms), then an update of 0.1 ms each: ends at 2.25 ms.
  PlanBuilder b("test", 2, 1, 32);
  const int32_t g = b.group({0, 1});
  for (int32_t w = 0; w < 2; ++w) {
    const OpId backward = b.add(compute_op(w, (w + 1) * 1e-3, {}, 0, OpKind::kBackward));
    const OpId ar = b.add(collective_op(w, OpKind::kAllReduce, g, 1e6, {backward}));
    b.add(compute_op(w, 0.1e-3, {ar}, 0, OpKind::kUpdate));
  }
  const SimResult r = simulate_plan(std::move(b).build(), simple_cluster(1, 2), {});
  ASSERT_DOUBLE_EQ(r.window_s, 2.25e-3);
  // Worker 0: compute 1.1; gap [1, 2.15]: [1, 2) waiting for worker 1
  // (imbalance 1), [2, 2.15] the AllReduce (exposed 0.15).
  EXPECT_NEAR(r.workers[0].breakdown.compute_s, 1.1e-3, 1e-12);
  EXPECT_NEAR(r.workers[0].breakdown.idle_imbalance_s, 1e-3, 1e-12);
  EXPECT_NEAR(r.workers[0].breakdown.exposed_comm_s, 0.15e-3, 1e-12);
  // Worker 1: compute 2.1, exposed 0.15, nothing else.
  EXPECT_NEAR(r.workers[1].breakdown.compute_s, 2.1e-3, 1e-12);
  EXPECT_NEAR(r.workers[1].breakdown.exposed_comm_s, 0.15e-3, 1e-12);
  EXPECT_EQ(r.workers[1].breakdown.idle_imbalance_s, 0);
  expect_worker_sums_to_window(r);
  // Averaged: compute (1.1 + 2.1) / 2 = 1.6, exposed 0.15, imbalance 0.5.
  EXPECT_NEAR(r.breakdown.compute_s, 1.6e-3, 1e-12);
  EXPECT_NEAR(r.breakdown.exposed_comm_s, 0.15e-3, 1e-12);
  EXPECT_NEAR(r.breakdown.idle_imbalance_s, 0.5e-3, 1e-12);
}

TEST(DesSummary, AQueueOfAllReducesIsAllExposedCommunication) {
  // Both workers: backward 1 ms, then two 1e6 B AllReduces queued on the send
  // stream (150 us each: 1.00 -> 1.15 -> 1.30 ms), then the update (0.1 ms)
  // after the second. The second waited on the first, its own queue, not on
  // the other worker: the whole 0.3 ms gap is exposed communication.
  PlanBuilder b("test", 2, 1, 32);
  const int32_t g = b.group({0, 1});
  for (int32_t w = 0; w < 2; ++w) {
    const OpId backward = b.add(compute_op(w, 1e-3, {}, 0, OpKind::kBackward));
    b.add(collective_op(w, OpKind::kAllReduce, g, 1e6, {backward}));
    const OpId second = b.add(collective_op(w, OpKind::kAllReduce, g, 1e6, {backward}));
    b.add(compute_op(w, 0.1e-3, {second}, 0, OpKind::kUpdate));
  }
  const SimResult r = simulate_plan(std::move(b).build(), simple_cluster(1, 2), {});
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.breakdown.compute_s, 1.1e-3, 1e-12);
    EXPECT_NEAR(w.breakdown.exposed_comm_s, 0.3e-3, 1e-12);
    EXPECT_EQ(w.breakdown.idle_imbalance_s, 0);
  }
  expect_worker_sums_to_window(r);
}

TEST(DesSummary, TheBreakdownCoversOnlyTheWindowAndScalesToOneIteration) {
  // Worker 0 computes 2 ms per iteration, worker 1 1 ms (independent chains),
  // 5 iterations: worker 0 sets the iteration ends 2, 4, ..., 10 ms; warm-up
  // 1 and drain 1, window [2, 8] = 6 ms, iteration 2 ms. Worker 1 finishes its
  // chain at 5 ms: compute in the window 3 ms ([2, 5]), imbalance 3 ms.
  PlanBuilder b("test", 2, 5, 32);
  for (int32_t i = 0; i < 5; ++i) {
    b.add(compute_op(0, 2e-3, {}, i));
    b.add(compute_op(1, 1e-3, {}, i));
  }
  const SimResult r = simulate_plan(std::move(b).build(), simple_cluster(1, 2), {});
  ASSERT_DOUBLE_EQ(r.window_s, 6e-3);
  ASSERT_DOUBLE_EQ(r.iteration_s, 2e-3);
  EXPECT_NEAR(r.workers[0].breakdown.compute_s, 6e-3, 1e-12);
  EXPECT_NEAR(r.workers[1].breakdown.compute_s, 3e-3, 1e-12);
  EXPECT_NEAR(r.workers[1].breakdown.idle_imbalance_s, 3e-3, 1e-12);
  expect_worker_sums_to_window(r);
  // Average over workers scaled by 2 / 6: compute (6 + 3) / 2 / 3 = 1.5 ms.
  EXPECT_NEAR(r.breakdown.compute_s, 1.5e-3, 1e-12);
  EXPECT_NEAR(r.breakdown.idle_imbalance_s, 0.5e-3, 1e-12);
}

TEST(DesSummary, PredictionCarriesTheSimulatedTimeBreakdownAndMemory) {
  PlanBuilder b("dp-test", 2, 1, 64);
  b.set_config({{"workers", 2}});
  for (int32_t w = 0; w < 2; ++w) {
    b.worker(w).static_bytes = 1000;
    Op f = compute_op(w, 2e-3);
    f.alloc_bytes = 300 + 100 * w;
    b.add(f);
  }
  const Plan plan = std::move(b).build();
  const Prediction p = prediction_from_simulation(plan, simulate_plan(plan, simple_cluster(1, 2), {}));
  EXPECT_EQ(p.method, "simulated");
  EXPECT_EQ(p.strategy, "dp-test");
  EXPECT_EQ(p.config["workers"], 2);
  EXPECT_EQ(p.workers, 2);
  EXPECT_DOUBLE_EQ(p.iteration_s, 2e-3);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 64 / 2e-3);  // 32000 samples/s
  EXPECT_DOUBLE_EQ(p.breakdown.compute_s, 2e-3);
  ASSERT_EQ(p.memory.size(), 2u);
  EXPECT_DOUBLE_EQ(p.memory[0].weights_bytes, 1000);
  EXPECT_DOUBLE_EQ(p.memory[0].activations_bytes, 300);
  EXPECT_DOUBLE_EQ(p.memory[1].total_bytes(), 1400);
  EXPECT_EQ(p.staleness, 0);
}

}  // namespace
}  // namespace trainsim
