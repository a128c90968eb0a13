// The interpreter on the GPU device (make_cuda_device, fp32 exact): every
// strategy's plan trains on workers sharing the GPU as it trains on CPU
// workers, and data parallelism on virtual GPU workers equals `single` with
// the whole batch; pipeline cuts across a residual branch and batch
// normalization's running statistics come through. Skipped without a GPU.
#include "exec/cuda/cuda_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "exec/cuda/cuda_device_store.hpp"
#include "tests/exec/strategy_runs.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

// Within the rounding of fp32 kernels summing in another order: every
// iteration's loss within 1e-3 relative, the final weights within 1e-3.
void expect_alike(const ExecResult& cpu, const ExecResult& gpu, const std::string& what) {
  ASSERT_EQ(cpu.loss_per_iteration.size(), gpu.loss_per_iteration.size()) << what;
  for (size_t i = 0; i < cpu.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(gpu.loss_per_iteration[i], cpu.loss_per_iteration[i], 1e-3 * std::fabs(cpu.loss_per_iteration[i]))
        << what << ", iteration " << i;
  }
  EXPECT_LT(strategy_runs::largest_weight_gap(cpu.weights, gpu.weights), 1e-3) << what;
}

RunSpec on_gpu(RunSpec spec) {
  spec.make_device = [model = strategy_runs::model_of(spec)](int32_t) {
    return make_cuda_device(model, 0, CudaPrecision::exact);
  };
  return spec;
}

class CudaDeviceStrategies : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(CudaDeviceStrategies, TrainsOnTwoWorkersSharingTheGpuAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const RunSpec& spec = GetParam().spec;
  const StrategyRun cpu = strategy_runs::run(spec);
  const StrategyRun gpu = strategy_runs::run(on_gpu(spec));
  // Where the CPU's loss falls over the run's few iterations (text-bag's
  // does not yet), the GPU's does too.
  if (cpu.result.loss_per_iteration.front() > cpu.result.loss_per_iteration.back()) {
    EXPECT_GT(gpu.result.loss_per_iteration.front(), gpu.result.loss_per_iteration.back());
  }
  expect_alike(cpu.result, gpu.result, GetParam().name);
}

// Every case, Parallax's on text-bag among them (its bag's sparse rows
// built on the host from the ids and dy each backward brings back).
INSTANTIATE_TEST_SUITE_P(EveryStrategy, CudaDeviceStrategies, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

// text-bag alone on the GPU: each backward's sparse rows built on the
// host, the table stepped on the GPU by those rows (the device store's
// lazy step), the dense layers too.
TEST(CudaDevice, TextBagsTableStepsOnTheGpuAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const RunSpec spec{.strategy = "single", .sgd = strategy_runs::kMomentum, .text = true};
  const StrategyRun cpu = strategy_runs::run(spec);
  const StrategyRun gpu = strategy_runs::run(on_gpu(spec));
  expect_alike(cpu.result, gpu.result, "single on text-bag");
}

TEST(CudaDevice, DataParallelOnFourVirtualWorkersEqualsSingleWithTheWholeBatch) {
  SKIP_WITHOUT_GPU();
  const StrategyRun single =
      strategy_runs::run(on_gpu({.strategy = "single", .batch = 4 * strategy_runs::kBatch, .sgd = strategy_runs::kMomentum,
                                 .per_machine = 1}));
  for (const char* strategy : {"dp-ring", "dp-ps", "cgdp"}) {
    const StrategyRun dp =
        strategy_runs::run(on_gpu({.strategy = strategy, .sgd = strategy_runs::kMomentum, .per_machine = 4}));
    strategy_runs::expect_same_training(single.result, dp.result, strategy);
  }
}

TEST(CudaDevice, APipelineCutAcrossAResidualBranchTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  // The boundary before fc2 carries fc1's output (for res) and act's.
  const RunSpec spec{.strategy = "gpipe", .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
                     .sgd = {0.1, 0.9, 0.0}, .make_model = strategy_runs::residual_mlp};
  expect_alike(strategy_runs::run(spec).result, strategy_runs::run(on_gpu(spec)).result, "gpipe across the branch");
  // fortunes-gpt cut inside block 0's second residual (add1 and fc2 cross).
  const RunSpec gpt{.strategy = "gpipe", .batch = 4, .settings = {{"microbatches", "2"}, {"stages", "0-8,9-19"}},
                    .iterations = 3, .sgd = {0.05, 0.9, 0.0},
                    .make_model = [] { return build_zoo_model("fortunes-gpt"); },
                    .make_batch = strategy_runs::byte_batch};
  expect_alike(strategy_runs::run(gpt).result, strategy_runs::run(on_gpu(gpt)).result, "gpipe across a decoder block");
  // fortunes-lstm cut between lstm1 and lstm2 (lstm1's output crosses for lstm2 and the add).
  const RunSpec lstm{.strategy = "gpipe",
                     .batch = 4,
                     .settings = {{"microbatches", "2"}, {"stages", "0-1,2-4"}},
                     .iterations = 3,
                     .sgd = {0.05, 0.9, 0.0},
                     .make_model = [] { return build_zoo_model("fortunes-lstm"); },
                     .make_batch = strategy_runs::byte_batch};
  expect_alike(strategy_runs::run(lstm).result, strategy_runs::run(on_gpu(lstm)).result, "gpipe between the LSTMs");
}

// A first stage of fmnist-mlp's flatten alone: the gradient the second
// stage sends back for the model's input passed on is dropped (no GPU
// network computes the model input's gradient), and it trains as on the CPU.
TEST(CudaDevice, AFirstStageFlatteningTheInputAloneTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const RunSpec spec{
      .strategy = "gpipe", .settings = {{"microbatches", "2"}, {"stages", "0-0,1-6"}}, .sgd = strategy_runs::kMomentum};
  expect_alike(strategy_runs::run(spec).result, strategy_runs::run(on_gpu(spec)).result, "gpipe after the flatten");
}

// A stage per GPU (GPUs 0 and 1 peers): the boundaries go device to
// device, each copied into the receiving GPU's store, and the pipeline
// trains as on the CPU. Skipped without two GPUs that are peers.
TEST(CudaDevice, APipelineOverPeerGpusTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  std::string reason;
  if (list_cuda_devices(reason).size() < 2 || !peer_gpus(0, 1)) {
    GTEST_SKIP() << "needs GPUs 0 and 1 with peer access both ways";
  }
  RunSpec spec{.strategy = "1f1b",
               .settings = {{"microbatches", "4"}, {"stages", "0-3,4-7"}},
               .sgd = {0.1, 0.9, 0.0},
               .make_model = strategy_runs::residual_mlp};
  RunSpec gpus = spec;
  gpus.make_device = [model = strategy_runs::model_of(spec)](int32_t worker) {
    return make_cuda_device(model, worker, CudaPrecision::exact);
  };
  expect_alike(strategy_runs::run(spec).result, strategy_runs::run(gpus).result, "1f1b over peer GPUs");
  // The path itself: GPU 0's forward output exported for GPU 1, taken in
  // there (copied onto GPU 1) and read by its forward of the next layers.
  const Model model = strategy_runs::model_of(spec);
  const Network net = build_network(model);
  const Weights w = init_weights(net, strategy_runs::kWeightSeed);
  Tensor x;
  std::vector<int32_t> labels;
  strategy_runs::synthetic_batch(0, strategy_runs::kBatch, x, labels);
  std::vector<LayerCache> reference;
  const Tensor h = forward_range(net, w, 0, 3, x, reference);
  const Tensor y = forward_range(net, w, 4, 5, h, reference);
  const std::unique_ptr<Device> zero = make_cuda_device(model, 0, CudaPrecision::exact);
  const std::unique_ptr<Device> one = make_cuda_device(model, 1, CudaPrecision::exact);
  ASSERT_TRUE(zero->reaches(*one));
  std::vector<LayerCache> caches0, caches1;
  const Tensor sent = zero->export_boundary(zero->forward(net, w, 1, PassId{0, 0}, 0, 3, x, caches0));
  ASSERT_NE(sent.exported, nullptr);
  EXPECT_EQ(sent.exported->memory, 0);
  Tensor received = one->import_boundary(sent);
  ASSERT_NE(received.exported, nullptr);
  EXPECT_EQ(received.exported->memory, 1);
  Tensor out = one->forward(net, w, 1, PassId{0, 0}, 4, 5, std::move(received), caches1);
  one->to_host(out);
  ASSERT_EQ(out.data.size(), y.data.size());
  for (size_t i = 0; i < y.data.size(); ++i)
    EXPECT_NEAR(out.data[i], y.data[i], 1e-4f * (1.0f + std::fabs(y.data[i]))) << i;
}

TEST(CudaDevice, BatchNormsRunningStatisticsComeBackFromTheGpu) {
  SKIP_WITHOUT_GPU();
  const RunSpec spec{.strategy = "gpipe", .settings = {{"microbatches", "2"}, {"stages", "0-1,2-4"}},
                     .sgd = {0.1, 0.9, 0.0}, .make_model = strategy_runs::batchnorm_mlp};
  const StrategyRun cpu = strategy_runs::run(spec);
  const StrategyRun gpu = strategy_runs::run(on_gpu(spec));
  expect_alike(cpu.result, gpu.result, "gpipe with batch norm");
  ASSERT_EQ(gpu.result.statistics.size(), 5u);
  ASSERT_EQ(gpu.result.statistics[2].size(), 2u);
  for (size_t p = 0; p < 2; ++p) {
    const std::vector<float>& want = cpu.result.statistics[2][p].data;
    const std::vector<float>& got = gpu.result.statistics[2][p].data;
    ASSERT_EQ(want.size(), got.size());
    for (size_t c = 0; c < want.size(); ++c) {
      EXPECT_NEAR(got[c], want[c], 1e-4 * std::max(1.0f, std::fabs(want[c]))) << "statistic " << p << ", channel " << c;
    }
  }
}

// Each forward's and backward's kernels timed by CUDA events: they start no
// earlier than the host queued them (within the clocks' meeting, microseconds),
// end after they start, and a worker's run one after another as its
// compute stream orders them; and the run trains as untimed.
TEST(CudaDevice, AComputeOpsKernelsAreTimedWhereTheyRun) {
  SKIP_WITHOUT_GPU();
  RunSpec spec = on_gpu({.strategy = "gpipe", .settings = {{"microbatches", "4"}}});
  const StrategyRun untimed = strategy_runs::run(spec);
  spec.time_device_work = true;
  const StrategyRun timed = strategy_runs::run(spec);
  expect_alike(untimed.result, timed.result, "gpipe timed");
  constexpr double kClocksMeet = 50e-6;  // GPU times against GPU times: one clock
  // A GPU time against the host's: the GPU's clock placed on the host's
  // within half the round trip of its origin's sample, which the driver's
  // lock held by another thread can stretch.
  constexpr double kHostMeetsGpu = 500e-6;
  double last_end_s = -1.0;
  int64_t ops = 0;
  for (const OpId id : timed.plan.streams[0][static_cast<int>(StreamKind::kCompute)]) {  // worker 0's, in order
    const Op& op = timed.plan.ops[static_cast<size_t>(id)];
    const ExecOpTiming& t = timed.result.timings[static_cast<size_t>(id)];
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
    ++ops;
    ASSERT_FALSE(std::isnan(t.device_start_s) || std::isnan(t.device_end_s)) << id;
    EXPECT_GE(t.device_start_s, t.start_s - kHostMeetsGpu) << id;
    EXPECT_GE(t.device_end_s, t.device_start_s) << id;
    EXPECT_GE(t.device_start_s, last_end_s - kClocksMeet) << id;
    last_end_s = t.device_end_s;
  }
  EXPECT_EQ(ops, spec.iterations * 4 * 2);  // 4 micro-batches forward and backward an iteration
  // A stage's range on a boundary from the other stage starts once that
  // stage's kernels made it: worker 1's forward of a micro-batch after
  // worker 0's, worker 0's backward after worker 1's.
  std::map<std::tuple<int32_t, int32_t, int>, const ExecOpTiming*> of;  // (iteration, micro-batch, kind)
  for (size_t id = 0; id < timed.plan.ops.size(); ++id) {
    const Op& op = timed.plan.ops[id];
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
      of[{op.iteration, op.microbatch, static_cast<int>(op.kind) * 2 + op.worker}] = &timed.result.timings[id];
    }
  }
  for (int32_t i = 0; i < spec.iterations; ++i) {
    for (int32_t m = 0; m < 4; ++m) {
      const auto at = [&](OpKind kind, int32_t worker) { return of.at({i, m, static_cast<int>(kind) * 2 + worker}); };
      EXPECT_GE(at(OpKind::kForward, 1)->device_start_s, at(OpKind::kForward, 0)->device_end_s - kClocksMeet);
      EXPECT_GE(at(OpKind::kBackward, 0)->device_start_s, at(OpKind::kBackward, 1)->device_end_s - kClocksMeet);
    }
  }
}

}  // namespace
}  // namespace trainsim
