// The Chrome trace of a run has the shape docs/formats.md "Trace" promises and
// Perfetto reads: one process per worker, one named thread per used stream,
// one complete event per op with its arguments, in microseconds.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sim/des/engine.hpp"
#include "tests/fixtures/profiles.hpp"
#include "tests/sim/des/des_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::compute_op;
using testing_fixtures::recv_op;
using testing_fixtures::send_op;
using testing_fixtures::simple_cluster;

// Worker 0: forward (stage 0, micro-batch 1, layers 0..2) then a send of
// 1e6 B; worker 1: the recv, then a backward. Streams used: 0 compute and
// send, 1 recv and compute.
Plan small_plan() {
  PlanBuilder b("test", 2, 1, 8);
  Op f = compute_op(0, 1e-3);
  f.stage = 0;
  f.microbatch = 1;
  f.first_layer = 0;
  f.last_layer = 2;
  const OpId fid = b.add(f);
  const OpId s = b.add(send_op(0, 1, 1e6, {fid}));
  const OpId rv = b.add(recv_op(1, 0, s));
  b.add(compute_op(1, 2e-3, {rv}, 0, OpKind::kBackward));
  return std::move(b).build();
}

TEST(DesTrace, HasOneProcessPerWorkerAndOneThreadPerUsedStream) {
  const Plan plan = small_plan();
  const nlohmann::json trace = chrome_trace(plan, simulate_plan(plan, simple_cluster(1, 2), {}));
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::set<std::string> processes;
  std::set<std::pair<int, std::string>> threads;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
    if (e["name"] == "thread_name") threads.insert({e["pid"].get<int>(), e["args"]["name"].get<std::string>()});
  }
  EXPECT_EQ(processes, (std::set<std::string>{"worker 0 (device 0)", "worker 1 (device 1)"}));
  EXPECT_EQ(threads, (std::set<std::pair<int, std::string>>{{0, "compute"}, {0, "send"}, {1, "recv"}, {1, "compute"}}));
}

TEST(DesTrace, EachOpIsACompleteEventWithItsArgumentsInMicroseconds) {
  const Plan plan = small_plan();
  const nlohmann::json trace = chrome_trace(plan, simulate_plan(plan, simple_cluster(1, 2), {}));
  std::vector<nlohmann::json> complete;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
  }
  ASSERT_EQ(complete.size(), plan.ops.size());
  const nlohmann::json& forward = complete[0];
  EXPECT_EQ(forward["name"], "forward s0 m1");
  EXPECT_EQ(forward["pid"], 0);
  EXPECT_EQ(forward["tid"], static_cast<int>(StreamKind::kCompute));
  EXPECT_DOUBLE_EQ(forward["ts"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(forward["dur"].get<double>(), 1000);  // 1 ms
  EXPECT_EQ(forward["args"]["op"], "forward");
  EXPECT_EQ(forward["args"]["stage"], 0);
  EXPECT_EQ(forward["args"]["microbatch"], 1);
  EXPECT_EQ(forward["args"]["iteration"], 0);
  EXPECT_EQ(forward["args"]["layers"], (nlohmann::json{0, 2}));
  const nlohmann::json& send = complete[1];
  EXPECT_EQ(send["name"], "send");
  EXPECT_EQ(send["tid"], static_cast<int>(StreamKind::kSend));
  EXPECT_DOUBLE_EQ(send["ts"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(send["dur"].get<double>(), 100);  // 1e6 B at 10 GB/s; the 10 us latency after it
  EXPECT_DOUBLE_EQ(send["args"]["bytes"].get<double>(), 1e6);
  EXPECT_FALSE(send["args"].contains("layers"));
  const nlohmann::json& backward = complete[3];
  EXPECT_EQ(backward["pid"], 1);
  EXPECT_DOUBLE_EQ(backward["ts"].get<double>(), 1110);
}

}  // namespace
}  // namespace trainsim
