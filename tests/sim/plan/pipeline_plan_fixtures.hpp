// Helpers for the pipeline plan tests (pipedream, pipedream-sync, dualpipe,
// gpipe, dsp): a worker's compute stream as schedule text, the peak memory
// its ops hold in program order, the Send behind a Recv, and plans of the zoo
// models generated and simulated on every preset.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/sim/plan/dp_plan_fixtures.hpp"

namespace trainsim::testing_fixtures {

// A worker's compute stream as text: F, B, W, R, U for forward, backward
// (or its input gradient alone), a backward's weight gradients alone,
// recompute and update with the mini-batch ("F3", or "F3.1" for micro-batch
// 1 of mini-batch 3), "|" for a barrier; "A" before an update that waits for
// an AllReduce. Reads like the schedule figures of the papers.
inline std::string schedule_text(const Plan& plan, int32_t worker) {
  std::string text;
  for (const Op* op : stream_ops(plan, worker, StreamKind::kCompute)) {
    std::string token;
    switch (op->kind) {
      case OpKind::kForward:
        token = "F";
        break;
      case OpKind::kBackward:
        token = op->gradients == GradientPart::kWeights ? "W" : "B";
        break;
      case OpKind::kRecompute:
        token = "R";
        break;
      case OpKind::kUpdate:
        token = "U";
        break;
      case OpKind::kBarrier:
        token = "|";
        break;
      default:
        token = op_kind_name(op->kind);
        break;
    }
    if (op->kind == OpKind::kUpdate) {
      const bool after_allreduce = std::any_of(op->deps.begin(), op->deps.end(), [&](OpId d) {
        return plan.ops[static_cast<size_t>(d)].kind == OpKind::kAllReduce;
      });
      if (after_allreduce) token = "A" + token;
    }
    if (op->kind != OpKind::kUpdate && op->kind != OpKind::kBarrier) {
      token += std::to_string(op->iteration);
      if (op->microbatch >= 0) token += "." + std::to_string(op->microbatch);
    }
    if (!text.empty()) text += ' ';
    text += token;
  }
  return text;
}

// The worker's static bytes plus the most its compute ops hold at once, in
// program order (each op allocates when it starts and frees when it ends):
// the simulator's peak when, as in these plans, only compute ops allocate.
inline double program_peak_bytes(const Plan& plan, int32_t worker) {
  double live = 0, peak = 0;
  for (const Op* op : stream_ops(plan, worker, StreamKind::kCompute)) {
    live += op->alloc_bytes;
    peak = std::max(peak, live);
    live -= op->free_bytes;
  }
  return plan.workers[static_cast<size_t>(worker)].static_bytes + peak;
}

// The Send a Recv waits for.
inline const Op& send_of(const Plan& plan, const Op& recv) {
  for (OpId d : recv.deps) {
    if (plan.ops[static_cast<size_t>(d)].kind == OpKind::kSend) return plan.ops[static_cast<size_t>(d)];
  }
  ADD_FAILURE() << "a recv without its send";
  return recv;
}

// The Recv a compute op depends on, or nullptr.
inline const Op* recv_of(const Plan& plan, const Op& consumer) {
  for (OpId d : consumer.deps) {
    if (plan.ops[static_cast<size_t>(d)].kind == OpKind::kRecv) return &plan.ops[static_cast<size_t>(d)];
  }
  return nullptr;
}

// Generates strategy `id`'s plan for the analytic profiles of ResNet-50 and
// VGG-16 on every preset and simulates it (a plan whose collectives wait on
// each other stops the simulator); with default settings, also the fixtures
// of expect_plans_everywhere.
inline void expect_pipeline_plans_everywhere(const std::string& id, const Settings& settings = {}) {
  if (settings.empty()) expect_plans_everywhere(id);
  for (const char* name : {"resnet50", "vgg16"}) {
    const Model model = build_zoo_model(name);
    for (const Cluster& cluster : cluster_presets()) {
      const Profile profile = analytic_profile(model, model.default_batch, cluster);
      EXPECT_NO_THROW(simulate_plan(generate(id, profile, cluster, settings, 4), cluster, SimOptions{}))
          << id << " " << name << " on " << cluster.name;
    }
  }
}

// Four layers of F 1, B 2 ms and 1 MB of weights with 1-byte activations on
// `devices` devices with latency-free links, so transfers take nothing:
// the simulated iteration of `id` must be `expected_s` (derived by the
// caller) and within 1% of its closed form.
inline void expect_negligible_transfer_iteration(const std::string& id, int64_t devices, const Settings& settings,
                                                 int32_t iterations, double expected_s) {
  const Profile profile = chain_profile(4, 1e-3, 2e-3, 1e6, 1.0);
  Cluster cluster = simple_cluster(1, devices);
  cluster.intra_link.latency_s = 0;
  const double simulated_s = simulated_iteration_s(generate(id, profile, cluster, settings, iterations), cluster);
  EXPECT_NEAR(simulated_s, expected_s, 1e-9);
  EXPECT_NEAR(simulated_s, analytic_iteration_s(id, profile, cluster, settings), 0.01 * expected_s);
}

}  // namespace trainsim::testing_fixtures
