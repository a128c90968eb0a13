// Analytic (roofline) profiler: hand-computed compute- and memory-bound
// layers, the backward rules, batch scaling, and every zoo model.
#include "profiles/analytic_profiler.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "model/error.hpp"
#include "model/zoo/builder.hpp"
#include "model/zoo/zoo.hpp"
#include "tests/fixtures/profiles.hpp"

namespace trainsim {
namespace {

// simple_cluster: 10 TFLOP/s fp32 peak, 100 GB/s device memory.
Cluster test_cluster() { return testing_fixtures::simple_cluster(1, 1); }

// input {1024} -> fc1 (1024 -> 1024) -> fc2 (1024 -> 1024) -> relu -> out.
Model two_linear_model() {
  ModelBuilder b("two-linear", "test", {1024}, 32);
  b.linear("fc1", kModelInput, 1024);
  b.linear("fc2", "fc1", 1024);
  b.relu("relu", "fc2");
  return std::move(b).build();
}

TEST(AnalyticProfiler, LinearLayerAtLargeBatchIsComputeBound) {
  const Profile p = analytic_profile(two_linear_model(), 4096, test_cluster());
  // fc1 FLOPs per sample: 2·1024·1024 + 1024 (bias) = 2,098,176; × 4096 =
  // 8,594,128,896. Bytes: 4·(1024 in + 1024 out)·4096 = 33,554,432 plus
  // 4·(1024·1024 + 1024) = 4,198,400 parameters = 37,752,832.
  const double compute_s = 8594128896.0 / (10e12 * kLinearEfficiency);
  const double memory_s = 37752832.0 / (100e9 * kMemoryEfficiency);
  ASSERT_GT(compute_s, memory_s);  // ~1.23 ms vs ~0.47 ms: the compute roof decides
  const LayerProfile& fc1 = p.layers[0];
  EXPECT_DOUBLE_EQ(fc1.forward_s, kLaunchOverheadS + compute_s);
  EXPECT_DOUBLE_EQ(fc1.flops.value(), 8594128896.0);
  // fc1 is fed only by the input: no input gradient, one weight-gradient pass.
  EXPECT_EQ(fc1.backward_input_s.value(), 0.0);
  EXPECT_DOUBLE_EQ(fc1.backward_weight_s.value(), fc1.forward_s);
  EXPECT_DOUBLE_EQ(fc1.backward_s, fc1.forward_s);
  // fc2 has the same shape, and its input carries a gradient: two passes.
  const LayerProfile& fc2 = p.layers[1];
  EXPECT_DOUBLE_EQ(fc2.forward_s, fc1.forward_s);
  EXPECT_DOUBLE_EQ(fc2.backward_input_s.value(), fc2.forward_s);
  EXPECT_DOUBLE_EQ(fc2.backward_s, 2 * fc2.forward_s);
}

TEST(AnalyticProfiler, ReluIsMemoryBound) {
  const Profile p = analytic_profile(two_linear_model(), 4096, test_cluster());
  // relu: 1 FLOP per element, 1024·4096 = 4,194,304 FLOPs; bytes 4·(1024 in +
  // 1024 out)·4096 = 33,554,432, no parameters.
  const double compute_s = 4194304.0 / (10e12 * kMemoryBoundOpEfficiency);
  const double memory_s = 33554432.0 / (100e9 * kMemoryEfficiency);
  ASSERT_LT(compute_s, memory_s);  // ~1.7 us vs ~419 us
  const LayerProfile& relu = p.layers[2];
  EXPECT_DOUBLE_EQ(relu.forward_s, kLaunchOverheadS + memory_s);
  // Backward moves twice the forward bytes; no split for parameter-free layers.
  EXPECT_DOUBLE_EQ(relu.backward_s, kLaunchOverheadS + 2 * 33554432.0 / (100e9 * kMemoryEfficiency));
  EXPECT_FALSE(relu.backward_input_s.has_value());
  EXPECT_EQ(relu.param_bytes, 0.0);
}

TEST(AnalyticProfiler, LayersBeforeAnyParameterNeedNoBackward) {
  // input {8, 8} -> flatten -> fc: nothing upstream of fc learns, so neither
  // flatten nor fc computes an input gradient.
  ModelBuilder b("mlp", "test", {8, 8}, 4);
  b.flatten("flat", kModelInput);
  b.linear("fc", "flat", 10);
  const Profile p = analytic_profile(std::move(b).build(), 16, test_cluster());
  EXPECT_EQ(p.layers[0].backward_s, 0.0);
  EXPECT_EQ(p.layers[1].backward_input_s.value(), 0.0);
  EXPECT_DOUBLE_EQ(p.layers[1].backward_s, p.layers[1].forward_s);
}

TEST(AnalyticProfiler, FieldsFollowTheModelBatchAndCluster) {
  const Model model = two_linear_model();
  const Cluster cluster = test_cluster();
  const Profile p = analytic_profile(model, 64, cluster);
  EXPECT_EQ(p.model, "two-linear");
  EXPECT_EQ(p.device.name, "test device");
  EXPECT_EQ(p.device.kind, "gpu");
  EXPECT_EQ(p.batch_size, 64);
  EXPECT_EQ(p.dtype, "fp32");
  EXPECT_EQ(p.source, "analytic");
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[1].inputs, (std::vector<std::string>{"fc1"}));
  // fc2: 1,049,600 parameters × 4 bytes; output 1024 × 64 samples × 4 bytes.
  EXPECT_EQ(p.layers[1].param_bytes, 4198400.0);
  EXPECT_EQ(p.layers[1].activation_bytes, 262144.0);
  EXPECT_FALSE(p.layers[1].sparse);
  EXPECT_EQ(p.layers[1].sparsity, 1.0);
}

TEST(AnalyticProfiler, SparseEmbeddingReadsOnlyItsRows) {
  // input {20} token ids -> embedding 10,000 × 64, sparse, at batch 32.
  ModelBuilder b("emb", "test", {20}, 32);
  b.embedding("emb", kModelInput, 10000, 64, true);
  const Model model = std::move(b).build();
  const Profile p = analytic_profile(model, 32, test_cluster());
  const LayerProfile& emb = p.layers[0];
  EXPECT_TRUE(emb.sparse);
  // 20 tokens × 32 samples = 640 uniform draws from 10,000 rows:
  // 1 - (1 - 1/10000)^640 ≈ 0.0620.
  EXPECT_NEAR(emb.sparsity, 1 - std::pow(1 - 1e-4, 640), 1e-12);
  EXPECT_DOUBLE_EQ(emb.sparsity, sparse_fraction(model.layers[0], 32));
  // No FLOPs; bytes 4·(20 ids + 20·64 out)·32 = 166,400 plus the 640 rows
  // read, 4·640·64 = 163,840 (not the 2.56 MB table): 330,240 at 80 GB/s.
  EXPECT_DOUBLE_EQ(emb.forward_s, kLaunchOverheadS + 330240.0 / (100e9 * kMemoryEfficiency));
  EXPECT_EQ(emb.param_bytes, 2560000.0);
}

TEST(AnalyticProfiler, LargeLayerTimesScaleLinearlyWithBatch) {
  // conv 64 -> 64, 3×3, pad 1 on 56×56: 231.4 MFLOP per sample; at batch 32
  // ~1.23 ms of compute vs ~0.64 ms of memory traffic, so compute-bound at
  // both batches and the time above the launch cost doubles exactly.
  ModelBuilder b("conv", "test", {64, 56, 56}, 32);
  b.conv2d("conv", kModelInput, conv(64, 3, 1, 1));
  const Model model = std::move(b).build();
  const double at32_s = analytic_profile(model, 32, test_cluster()).layers[0].forward_s - kLaunchOverheadS;
  const double at64_s = analytic_profile(model, 64, test_cluster()).layers[0].forward_s - kLaunchOverheadS;
  EXPECT_NEAR(at64_s / at32_s, 2.0, 1e-12);
  EXPECT_NEAR(at32_s, 231411712.0 * 32 / (10e12 * kConvEfficiency), 1e-15);
}

TEST(AnalyticProfiler, BatchBelowOneIsRejected) {
  try {
    analytic_profile(two_linear_model(), 0, test_cluster());
    FAIL() << "batch 0 was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--batch");
  }
}

TEST(AnalyticProfiler, EveryZooModelProfilesAndValidates) {
  // The zoo may still be growing; whatever it holds must profile cleanly.
  const Cluster cluster = load_cluster("p40x4-pcie3");
  for (const ZooEntry& entry : zoo_entries()) {
    SCOPED_TRACE(entry.name);
    const Model model = entry.build();
    const Profile p = analytic_profile(model, model.default_batch, cluster);
    EXPECT_NO_THROW(validate_profile(p, entry.name));
    EXPECT_EQ(p.layers.size(), model.layers.size());
    EXPECT_GT(total_forward_s(p), 0.0);
    EXPECT_GT(total_backward_s(p), 0.0);
    EXPECT_DOUBLE_EQ(total_param_bytes(p), 4.0 * static_cast<double>(param_count(model)));
  }
}

}  // namespace
}  // namespace trainsim
