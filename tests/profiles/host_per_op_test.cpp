// A GPU worker's host time per compute op, measured through the executor
// (profiles/profiler/host_per_op.hpp): the fit by kind and layer count, and
// the measurement run on the CPU, where an op's host time is the whole op.
#include "profiles/profiler/host_per_op.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "exec/training.hpp"
#include "model/error.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"

namespace trainsim {
namespace {

Plan single_plan(const std::string& model, int32_t iterations) {
  const Cluster cluster = nominal_cpu_cluster(1);
  return generate_plan(find_strategy("single", "test"), analytic_profile(build_zoo_model(model), 64, cluster), cluster,
                       {}, iterations);
}

// Timings of `plan` whose ops of iteration 0 took a second (left out) and
// the others `seconds(op)`, back to back.
std::vector<ExecOpTiming> timed(const Plan& plan, const std::function<double(const Op&)>& seconds) {
  std::vector<ExecOpTiming> timings(plan.ops.size());
  double t = 0;
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const double s = plan.ops[id].iteration == 0 ? 1.0 : seconds(plan.ops[id]);
    timings[id].start_s = t;
    timings[id].end_s = t += s;
  }
  return timings;
}

// fmnist-cnn's single plan: forwards and backwards over 1, 3, 4 and 2
// layers, an update over all 10. Forwards taking 30 + 10/layer us give
// back that line; backwards of 50 us whatever their layers, 50 flat; the
// update's 240 us, its one layer count, 24 us per layer; iteration 0's
// seconds nowhere.
TEST(HostPerOp, TheFitGivesBackEachKindsLineAfterTheWarmUp) {
  const Plan plan = single_plan("fmnist-cnn", 3);
  std::set<int64_t> forward_layers;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kForward) forward_layers.insert(layers_spanned(op));
  }
  ASSERT_GE(forward_layers.size(), 2u) << "the test needs forwards over several layer counts";
  const auto seconds = [](const Op& op) {
    if (op.kind == OpKind::kForward) return 30e-6 + 10e-6 * static_cast<double>(layers_spanned(op));
    if (op.kind == OpKind::kBackward) return 50e-6;
    return 240e-6;
  };
  const DeviceSpec::HostPerOp host = fit_host_per_op(plan, {timed(plan, seconds)}, 1);
  EXPECT_NEAR(host.forward.fixed_s, 30e-6, 1e-12);
  EXPECT_NEAR(host.forward.per_layer_s, 10e-6, 1e-12);
  EXPECT_NEAR(host.backward.fixed_s, 50e-6, 1e-12);
  EXPECT_EQ(host.backward.per_layer_s, 0);
  EXPECT_EQ(host.update.fixed_s, 0);
  EXPECT_NEAR(host.update.per_layer_s, 24e-6, 1e-12);
}

// Neither part below 0: forwards faster the more layers they span fit flat
// at their mean over the layer counts; a steep line that would cross 0
// above 0 layers goes through 0 instead (medians 10, 70, 100, 130 us at
// 1, 2, 3, 4 layers: least squares 40/layer from −15 us, through 0:
// (10 + 140 + 300 + 520) / (1 + 4 + 9 + 16) = 32.33 us a layer).
TEST(HostPerOp, NeitherPartOfTheFitIsBelowZero) {
  const Plan plan = single_plan("fmnist-cnn", 2);
  const auto falling = [](const Op& op) { return 100e-6 / static_cast<double>(layers_spanned(op)); };
  const DeviceSpec::HostPerOp flat = fit_host_per_op(plan, {timed(plan, falling)}, 1);
  EXPECT_NEAR(flat.forward.fixed_s, (100.0 + 100.0 / 3 + 25.0 + 50.0) / 4 * 1e-6, 1e-12);
  EXPECT_EQ(flat.forward.per_layer_s, 0);
  const auto steep = [](const Op& op) {
    const double medians[] = {0, 10e-6, 70e-6, 100e-6, 130e-6};
    return medians[layers_spanned(op) <= 4 ? layers_spanned(op) : 0];
  };
  const DeviceSpec::HostPerOp through_zero = fit_host_per_op(plan, {timed(plan, steep)}, 1);
  EXPECT_EQ(through_zero.forward.fixed_s, 0);
  EXPECT_NEAR(through_zero.forward.per_layer_s, 970e-6 / 30, 1e-12);
}

// Several runs' ops pool: each layer count's median is over all of them
// (forwards of 20 us in one run and 40 us in two others: 40 us).
TEST(HostPerOp, TheFitPoolsTheRunsOps) {
  const Plan plan = single_plan("fmnist-cnn", 2);
  const auto at = [](double s) { return [s](const Op&) { return s; }; };
  const DeviceSpec::HostPerOp host =
      fit_host_per_op(plan, {timed(plan, at(20e-6)), timed(plan, at(40e-6)), timed(plan, at(40e-6))}, 1);
  EXPECT_NEAR(host.forward.fixed_s, 40e-6, 1e-12);
  EXPECT_EQ(host.forward.per_layer_s, 0);
}

// On the CPU the executor's ops are their whole work: every kind's host
// time is there and finite, alone and with two workers at once, each its
// own run.
TEST(HostPerOp, MeasuredOnTheCpuEveryKindTakesTheHostTime) {
  MeasureOptions options;
  options.warmups = 1;
  options.repeats = 4;
  const Model model = build_zoo_model("fmnist-mlp");
  for (const int64_t workers : {1, 2}) {
    SCOPED_TRACE(workers);
    const DeviceSpec::HostPerOp host = measure_host_per_op(model, 16, workers, nullptr, options);
    for (const DeviceSpec::HostTime* t : {&host.forward, &host.backward, &host.update}) {
      EXPECT_TRUE(std::isfinite(t->fixed_s) && std::isfinite(t->per_layer_s));
      EXPECT_GT(t->seconds(1), 0);
      EXPECT_LT(t->seconds(1), 1.0);
    }
  }
  EXPECT_THROW(measure_host_per_op(model, 0, 1, nullptr, options), InputError);
  EXPECT_THROW(measure_host_per_op(model, 16, 0, nullptr, options), InputError);
}

}  // namespace
}  // namespace trainsim
