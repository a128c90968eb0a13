// The plan IR's builder and validation: a broken plan is caught at build time.
#include "sim/plan/plan.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace trainsim {
namespace {

Op compute(int32_t worker, OpKind kind, double work_s) {
  Op op;
  op.kind = kind;
  op.worker = worker;
  op.work_s = work_s;
  return op;
}

TEST(Plan, BuilderKeepsStreamsInProgramOrder) {
  PlanBuilder b("test", 2, 1, 8);
  const OpId f = b.add(compute(0, OpKind::kForward, 1e-3));
  const OpId u = b.add(compute(0, OpKind::kUpdate, 1e-4));
  Op send;
  send.kind = OpKind::kSend;
  send.stream = StreamKind::kSend;
  send.peer = 1;
  send.bytes = 100;
  send.deps = {f};
  const OpId s = b.add(send);
  Op recv;
  recv.kind = OpKind::kRecv;
  recv.stream = StreamKind::kRecv;
  recv.worker = 1;
  recv.peer = 0;
  recv.deps = {s};
  b.add(recv);
  const Plan plan = std::move(b).build();
  EXPECT_EQ(plan.streams[0][static_cast<int>(StreamKind::kCompute)], (std::vector<OpId>{f, u}));
  EXPECT_EQ(plan.streams[0][static_cast<int>(StreamKind::kSend)], std::vector<OpId>{s});
  EXPECT_EQ(plan_to_json(plan)["ops"].size(), 4u);
  EXPECT_EQ(plan_to_json(plan)["ops"][2]["op"], "send");
}

TEST(Plan, RecvWithoutItsSendIsRejected) {
  PlanBuilder b("test", 2, 1, 8);
  Op recv;
  recv.kind = OpKind::kRecv;
  recv.stream = StreamKind::kRecv;
  recv.worker = 1;
  recv.peer = 0;
  b.add(recv);
  EXPECT_THROW(std::move(b).build(), std::logic_error);
}

TEST(Plan, CycleThroughDepsAndStreamOrderIsRejected) {
  // Worker 0 runs a then b; a depends on c, c depends on b: a waits forever.
  PlanBuilder b("test", 2, 1, 8);
  const OpId a = b.add(compute(0, OpKind::kForward, 1e-3));
  const OpId later = b.add(compute(0, OpKind::kBackward, 1e-3));
  Op c = compute(1, OpKind::kForward, 1e-3);
  c.deps = {later};
  const OpId cid = b.add(c);
  b.op(a).deps = {cid};
  EXPECT_THROW(std::move(b).build(), std::logic_error);
}

TEST(Plan, CollectiveMustNameAGroupItBelongsTo) {
  PlanBuilder b("test", 3, 1, 8);
  const int32_t g = b.group({1, 0});
  EXPECT_EQ(b.group({0, 1}), g);  // equal groups share one index
  Op ar;
  ar.kind = OpKind::kAllReduce;
  ar.stream = StreamKind::kSend;
  ar.worker = 2;
  ar.group = g;
  b.add(ar);
  EXPECT_THROW(std::move(b).build(), std::logic_error);
}

TEST(Plan, AServerStepIsAServersOnAHostStream) {
  const auto plan_with = [](int32_t first_layer, StreamKind stream) {
    PlanBuilder b("test", 1, 1, 8);
    b.add_server({0, 0, ServerRule::kSparseRows});
    Op step;
    step.kind = OpKind::kServerStep;
    step.stream = stream;
    step.first_layer = step.last_layer = first_layer;
    step.work_s = 1e-4;
    b.add(step);
    return std::move(b).build();
  };
  EXPECT_EQ(plan_to_json(plan_with(0, StreamKind::kHost))["ops"][0]["op"], "server_step");
  EXPECT_THROW(plan_with(1, StreamKind::kHost), std::logic_error);     // no server holds layer 1
  EXPECT_THROW(plan_with(0, StreamKind::kCompute), std::logic_error);  // not on the host
}

}  // namespace
}  // namespace trainsim
