// The Kineto importer: a hand-made trace whose every layer time is computed
// by hand (ops, their backward by sequence number, a backward without a
// match, the optimizer, NCCL beside compute, a kernel before the first step,
// the file's order shuffled, without GPU events); the three real traces;
// bad input as one clear error.
#include "profiles/kineto/kineto_import.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "model/error.hpp"

namespace trainsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string real_trace(const std::string& name) {
  return (fs::path(TRAINSIM_TEST_DATA_DIR) / "kineto" / (name + ".json.gz")).string();
}

class TempFile {
 public:
  explicit TempFile(const std::string& suffix)
      : path_(fs::temp_directory_path() / ("trainsim-kineto-" + std::to_string(getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + suffix)) {}
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string write(const std::string& text) const {
    std::ofstream(path_, std::ios::binary) << text;
    return path_.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

json span(const std::string& cat, const std::string& name, double ts, double dur, int tid, json args = json::object()) {
  return {{"ph", "X"},  {"cat", cat}, {"name", name}, {"pid", tid == 7 || tid == 9 ? 0 : 1},
          {"tid", tid}, {"ts", ts},   {"dur", dur},   {"args", std::move(args)}};
}

// An op on the host launching one GPU event: the op, its launch, the kernel.
void op_with_kernel(json& events, const std::string& cat, const std::string& name, double ts, double dur, int tid,
                    json args, int64_t correlation, double kernel_ts, double kernel_dur, bool gpu) {
  events.push_back(span(cat, name, ts, dur, tid, std::move(args)));
  if (!gpu) return;
  events.push_back(span("cuda_runtime", "cudaLaunchKernel", ts + 1, 1, tid, {{"correlation", correlation}}));
  events.push_back(span("kernel", name + "_kernel", kernel_ts, kernel_dur, 7, {{"correlation", correlation}}));
}

// Three steps of a convolution, a ReLU and a linear layer (docs: the test's
// header); step 2's convolution kernel takes 40 µs, the others' 30.
json hand_trace(bool gpu = true, bool modules = false) {
  json events = json::array();
  if (gpu) {  // launched before the first step: not the trace's
    events.push_back(span("cuda_runtime", "cudaLaunchKernel", -50, 1, 1, {{"correlation", 999}}));
    events.push_back(span("kernel", "early", -20, 7, 7, {{"correlation", 999}}));
  }
  for (int step = 0; step < 3; ++step) {
    const double t0 = 1000.0 * step;
    const int64_t c = 1000 * (step + 1);
    const int64_t q = 1000 * step;  // sequence numbers grow from step to step
    events.push_back(
        span("user_annotation", "ProfilerStep#" + std::to_string(step + 1), t0, step == 1 ? 900 : 1000, 1));
    json conv_args = {{"Sequence number", q + 100},
                      {"Input Dims", {{8, 3, 4, 4}, {16, 3, 3, 3}, {16}}},
                      {"Input type", {"float", "float", "float"}}};
    op_with_kernel(events, "cpu_op", "aten::conv2d", t0 + 10, 50, 1, conv_args, c + 1, t0 + 100, step == 1 ? 40 : 30,
                   gpu);
    events.push_back(span("cpu_op", "aten::convolution", t0 + 12, 40, 1, {{"Sequence number", q + 101}}));
    op_with_kernel(events, "cpu_op", "aten::relu", t0 + 70, 20, 1,
                   {{"Sequence number", q + 102}, {"Input Dims", {{8, 16, 4, 4}}}, {"Input type", {"float"}}}, c + 2,
                   t0 + 140, 10, gpu);
    op_with_kernel(events, "cpu_op", "aten::linear", t0 + 95, 20, 1,
                   {{"Sequence number", q + 103},
                    {"Input Dims", {{8, 256}, {10, 256}, {10}}},
                    {"Input type", {"float", "float", "float"}}},
                   c + 3, t0 + 160, 20, gpu);
    if (modules) {  // with_modules=True: the net's module around its layers' (and an op of its own)
      events.push_back(span("python_function", "nn.Module: Net_0", t0 + 5, 125, 1));
      events.push_back(span("python_function", "nn.Module: Conv2d_0", t0 + 9, 52, 1));
      events.push_back(span("python_function", "nn.Module: ReLU_0", t0 + 69, 22, 1));
      events.push_back(span("cpu_op", "aten::flatten", t0 + 92, 1, 1));
      events.push_back(span("python_function", "nn.Module: Linear_0", t0 + 94, 22, 1));
    }
    const auto backward = [&](const std::string& node, double ts, double dur, int64_t seq, int64_t corr, double kts,
                              double kdur) {
      op_with_kernel(events, "cpu_op", "autograd::engine::evaluate_function: " + node, t0 + ts, dur, 2,
                     {{"Sequence number", seq}, {"Fwd thread id", 1}}, corr, t0 + kts, kdur, gpu);
    };
    backward("AddmmBackward0", 200, 30, q + 103, c + 4, 240, 40);
    backward("ReluBackward0", 240, 20, q + 102, c + 5, 285, 10);
    backward("torch::autograd::AccumulateGrad", 262, 5, 777777 + step, c + 6, 300, 5);  // matches no forward op
    backward("ConvolutionBackward0", 270, 30, q + 101, c + 7, 310, 60);                 // the inner op's number
    if (gpu) {
      events.push_back(span("cuda_runtime", "cudaLaunchKernel", t0 + 305, 1, 2, {{"correlation", c + 8}}));
      events.push_back(span("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", t0 + 350, 50, 9,
                            {{"correlation", c + 8}, {"In msg nelems", 1000}, {"dtype", "Float"}}));
    }
    events.push_back(span("user_annotation", "Optimizer.step#SGD.step", t0 + 400, 50, 1));
    op_with_kernel(events, "cpu_op", "aten::add_", t0 + 405, 10, 1, json::object(), c + 9, t0 + 420, 8, gpu);
  }
  return {{"schemaVersion", 1},
          {"deviceProperties", {{{"id", 0}, {"name", "Test GPU"}, {"totalGlobalMem", 16e9}}}},
          {"traceEvents", events}};
}

KinetoImport import_text(const std::string& text, const std::string& granularity = "auto") {
  const TempFile file(".json");
  return import_kineto(read_kineto_trace(file.write(text)), {granularity, 0, "hand"});
}

TEST(KinetoImport, EveryLayerTimeOfAHandMadeTraceByHand) {
  const KinetoImport r = import_text(hand_trace().dump());
  const Profile& p = r.profile;
  ASSERT_EQ(p.layers.size(), 2u);  // the ReLU, without weights, joins the convolution
  EXPECT_EQ(p.layers[0].name, "conv2d_0");
  EXPECT_EQ(p.layers[1].name, "linear_0");
  EXPECT_EQ(p.layers[1].inputs, std::vector<std::string>{"conv2d_0"});
  // Forward: the kernels its ops launched (the convolution's median of 30, 40, 30 µs).
  EXPECT_NEAR(p.layers[0].forward_s, (30 + 10) * 1e-6, 1e-12);
  EXPECT_NEAR(p.layers[1].forward_s, 20e-6, 1e-12);
  // Backward: ReluBackward0 (10) and ConvolutionBackward0 (60) by their
  // sequence numbers, AccumulateGrad (5) with the backward run before it.
  EXPECT_NEAR(p.layers[0].backward_s, (10 + 5 + 60) * 1e-6, 1e-12);
  EXPECT_NEAR(p.layers[1].backward_s, 40e-6, 1e-12);
  // Sizes from the recorded shapes: weights and biases, the linear's input.
  const double conv = (16 * 3 * 3 * 3 + 16) * 4.0, linear = (10 * 256 + 10) * 4.0;
  EXPECT_DOUBLE_EQ(p.layers[0].param_bytes, conv);
  EXPECT_DOUBLE_EQ(p.layers[1].param_bytes, linear);
  EXPECT_DOUBLE_EQ(p.layers[0].activation_bytes, 8 * 256 * 4.0);
  EXPECT_EQ(p.batch_size, 8);
  // The optimizer's 8 µs by the layers' parameters.
  EXPECT_NEAR(*p.layers[0].update_s, 8e-6 * conv / (conv + linear), 1e-12);
  EXPECT_NEAR(*p.layers[1].update_s, 8e-6 * linear / (conv + linear), 1e-12);
  // The steps: compute 183 µs, NCCL 50 µs of which 20 beside compute.
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_NEAR(r.median.compute_s, 183e-6, 1e-12);
  EXPECT_NEAR(r.median.comm_s, 50e-6, 1e-12);
  EXPECT_NEAR(r.median.overlap_s, 20e-6, 1e-12);
  EXPECT_NEAR(r.median.gpu_busy_s, 213e-6, 1e-12);
  EXPECT_NEAR(r.median.step_s, 1000e-6, 1e-12);
  EXPECT_TRUE(r.host_bound);  // idle 787 of 1000 µs
  EXPECT_DOUBLE_EQ(r.gradient_bytes, 4000);
  EXPECT_EQ(r.steps[0].all_reduce_bytes, std::vector<double>{4000});
  EXPECT_EQ(p.source, "imported:kineto");
  EXPECT_EQ(p.device.name, "Test GPU");
}

TEST(KinetoImport, GranularityCutsEveryOpOrMergesIntoN) {
  const KinetoImport ops = import_text(hand_trace().dump(), "op");
  ASSERT_EQ(ops.profile.layers.size(), 3u);
  EXPECT_EQ(ops.profile.layers[1].name, "relu_0");
  EXPECT_NEAR(ops.profile.layers[1].backward_s, 15e-6, 1e-12);  // ReluBackward0 and the AccumulateGrad after it
  const KinetoImport one = import_text(hand_trace().dump(), "1");
  ASSERT_EQ(one.profile.layers.size(), 1u);
  EXPECT_NEAR(one.profile.layers[0].forward_s, 60e-6, 1e-12);
  EXPECT_NEAR(one.profile.layers[0].backward_s, 115e-6, 1e-12);
  for (const std::string bad : {"0", "x", "-2", "3.5"}) {
    try {
      import_text(hand_trace().dump(), bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "--granularity") << e.what();
    }
  }
}

// with_modules=True: a layer a leaf module (the flatten the net runs itself
// joins the module before), named after it; --granularity layer ignores them.
TEST(KinetoImport, ModuleSpansMakeTheLayers) {
  const KinetoImport r = import_text(hand_trace(true, true).dump());
  ASSERT_EQ(r.profile.layers.size(), 3u);
  EXPECT_EQ(r.profile.layers[0].name, "Conv2d_0");
  EXPECT_EQ(r.profile.layers[1].name, "ReLU_0");
  EXPECT_EQ(r.profile.layers[2].name, "Linear_0");
  EXPECT_NEAR(r.profile.layers[0].forward_s, 30e-6, 1e-12);
  EXPECT_NEAR(r.profile.layers[0].backward_s, 60e-6, 1e-12);
  EXPECT_NEAR(r.profile.layers[1].forward_s, 10e-6, 1e-12);
  EXPECT_NEAR(r.profile.layers[1].backward_s, 15e-6, 1e-12);  // ReluBackward0 and the AccumulateGrad after it
  EXPECT_NEAR(r.profile.layers[2].backward_s, 40e-6, 1e-12);
  EXPECT_DOUBLE_EQ(r.profile.layers[1].activation_bytes, 8 * 256 * 4.0);  // the linear's input
  const KinetoImport by_weights = import_text(hand_trace(true, true).dump(), "layer");
  ASSERT_EQ(by_weights.profile.layers.size(), 2u);
  EXPECT_EQ(by_weights.profile.layers[0].name, "conv2d_0");
}

TEST(KinetoImport, TheFilesOrderDoesNotMatter) {
  json shuffled = hand_trace();
  std::mt19937 rng(7);
  std::shuffle(shuffled["traceEvents"].begin(), shuffled["traceEvents"].end(), rng);
  const KinetoImport a = import_text(hand_trace().dump()), b = import_text(shuffled.dump());
  ASSERT_EQ(a.profile.layers.size(), b.profile.layers.size());
  for (size_t i = 0; i < a.profile.layers.size(); ++i) {
    EXPECT_DOUBLE_EQ(a.profile.layers[i].forward_s, b.profile.layers[i].forward_s);
    EXPECT_DOUBLE_EQ(a.profile.layers[i].backward_s, b.profile.layers[i].backward_s);
  }
}

TEST(KinetoImport, WithoutGpuEventsTheOpsHostTimesAreTheLayers) {
  const KinetoImport r = import_text(hand_trace(false).dump());
  ASSERT_EQ(r.profile.layers.size(), 2u);
  EXPECT_EQ(r.profile.device.kind, "cpu");
  EXPECT_NEAR(r.profile.layers[0].forward_s, (50 + 20) * 1e-6, 1e-12);
  EXPECT_NEAR(r.profile.layers[0].backward_s, (20 + 5 + 30) * 1e-6, 1e-12);
  EXPECT_NEAR(r.profile.layers[1].backward_s, 30e-6, 1e-12);
  EXPECT_FALSE(r.host_bound);
  ASSERT_FALSE(r.notes.empty());  // the fallback is stated
  EXPECT_NE(r.notes.front().find("no GPU events"), std::string::npos) << r.notes.front();
}

// The three real traces: every one imports, its layers hold the GPU's
// compute time, ResNet-50's parameters come out of the shapes (the 2021
// trace) and out of DDP's buckets (the A100 pair).
TEST(KinetoImport, TheRealTracesLayersHoldTheirGpuTime) {
  for (const std::string name : {"hta_ns_resolution_V100x1_rank0", "kineto_tbplugin_resnet50_V100x1_legacy",
                                 "hta_nccl_data_A100x2_resnet50_ddp_rank0"}) {
    const KinetoImport r = import_kineto(read_kineto_trace(real_trace(name)), {});
    double sum = 0;
    for (const LayerProfile& l : r.profile.layers) {
      if (l.name != "dataloader") sum += l.forward_s + l.backward_s + l.update_s.value_or(0);
    }
    EXPECT_NEAR(sum / r.median.compute_s, 1.0, 0.02) << name;
    EXPECT_EQ(r.profile.device.kind, "gpu") << name;
  }
  const KinetoTrace legacy = read_kineto_trace(real_trace("kineto_tbplugin_resnet50_V100x1_legacy"));
  EXPECT_TRUE(legacy.legacy);
  const KinetoImport old = import_kineto(legacy, {});
  double params = 0;
  for (const LayerProfile& l : old.profile.layers) params += l.param_bytes;
  EXPECT_DOUBLE_EQ(params, 4.0 * 25'557'032);  // ResNet-50, fp32
  EXPECT_EQ(old.profile.batch_size, 32);
  EXPECT_EQ(old.profile.layers.front().name, "dataloader");
  EXPECT_DOUBLE_EQ(old.profile.layers[1].activation_bytes, 32.0 * 64 * 112 * 112 * 4);  // conv1's output
  EXPECT_TRUE(old.host_bound);
  const KinetoImport ddp = import_kineto(read_kineto_trace(real_trace("hta_nccl_data_A100x2_resnet50_ddp_rank0")), {});
  EXPECT_DOUBLE_EQ(ddp.gradient_bytes, 4.0 * 25'557'032);
  // Its five buckets, as their NCCL kernels count their fp32 elements.
  std::vector<double> buckets = ddp.steps.front().all_reduce_bytes;
  std::sort(buckets.begin(), buckets.end());
  EXPECT_EQ(buckets,
            (std::vector<double>{4.0 * 2'049'000, 4.0 * 2'431'040, 4.0 * 6'563'840, 4.0 * 6'637'568, 4.0 * 7'875'584}));
  EXPECT_TRUE(ddp.host_bound);
  EXPECT_FALSE(ddp.batch_known);
  const KinetoImport ns = import_kineto(read_kineto_trace(real_trace("hta_ns_resolution_V100x1_rank0")), {});
  EXPECT_FALSE(ns.host_bound);
  EXPECT_NEAR(ns.median.step_s, 95.6e-3, 0.2e-3);
}

TEST(KinetoImport, BadInputIsOneErrorNamingTheFile) {
  const TempFile file(".json");
  const auto error_of = [&file](const std::string& text) -> std::string {
    try {
      import_kineto(read_kineto_trace(file.write(text)), {});
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("{\"a\": 1}").find("has no traceEvents"), std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [1, 2").find("ends early"), std::string::npos);
  EXPECT_NE(error_of("not json").find("is not JSON at byte"), std::string::npos);
  EXPECT_NE(error_of("").find("ends early"), std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"i\", \"ts\": 1}]}").find("has no spans"), std::string::npos);
  json no_step = hand_trace();
  no_step["traceEvents"].erase(
      std::remove_if(no_step["traceEvents"].begin(), no_step["traceEvents"].end(),
                     [](const json& e) { return e["name"].get<std::string>().starts_with("ProfilerStep"); }),
      no_step["traceEvents"].end());
  EXPECT_NE(error_of(no_step.dump()).find("has no ProfilerStep#N spans"), std::string::npos);
  json no_ts = hand_trace();
  no_ts["traceEvents"][3].erase("ts");
  EXPECT_NE(error_of(no_ts.dump()).find("without a numeric ts and dur"), std::string::npos);
  EXPECT_NE(error_of(no_ts.dump()).find(file.path()), std::string::npos);
}

// Fields of other types than a trace's (what the fuzzer found: a name that
// is a number) are read as missing, never thrown on.
TEST(KinetoImport, FieldsOfTheWrongTypeAreReadAsMissing) {
  json odd = hand_trace();
  odd["traceEvents"][3]["name"] = 0;
  odd["traceEvents"][3]["pid"] = json::array({1});
  odd["deviceProperties"][0]["name"] = 3;
  odd["deviceProperties"][0]["totalGlobalMem"] = "a lot";
  odd["distributedInfo"] = {{"world_size", "two"}, {"rank", -4}, {"backend", 7}};
  for (json& e : odd["traceEvents"]) {
    if (e["name"].is_string() && e["name"].get<std::string>().starts_with("nccl")) e["args"]["dtype"] = 5;
  }
  const TempFile file(".json");
  const KinetoTrace trace = read_kineto_trace(file.write(odd.dump()));
  EXPECT_EQ(trace.world_size, 1);
  EXPECT_EQ(trace.device_name, "");
  EXPECT_EQ(trace.device_memory_bytes, 0);
  const KinetoImport r = import_kineto(trace, {});
  EXPECT_EQ(r.profile.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(r.gradient_bytes, 4000);  // an unknown dtype counts 4 bytes an element
  json negative = hand_trace();
  negative["traceEvents"][4]["dur"] = -1;
  EXPECT_THROW(read_kineto_trace(file.write(negative.dump())), InputError);
  for (const std::string huge : {"99999999999999999999", "18446744073709551616"}) {
    EXPECT_THROW(import_kineto(trace, {huge, 0, ""}), InputError) << huge;
  }
}

TEST(KinetoImport, ATruncatedGzipIsNamedSo) {
  const std::string whole = real_trace("hta_nccl_data_A100x2_resnet50_ddp_rank0");
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const TempFile cut(".json.gz");
  cut.write(bytes.substr(0, bytes.size() / 2));
  try {
    read_kineto_trace(cut.path());
    ADD_FAILURE() << "read a truncated trace";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  try {
    read_kineto_trace(cut.path() + ".missing");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainsim
