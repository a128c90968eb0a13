// The NCCL transport (make_nccl_transport): workers each on a GPU of their
// own, the library AllReduce by NCCL. Training needs two GPUs or more (NCCL
// refuses two ranks on one GPU), so it skips with the reason on machines of
// fewer; its refusals are tested everywhere (tests/exec/nccl_transport_errors_test.cpp).
#include "exec/cuda/nccl_transport.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/cuda/cuda_device.hpp"
#include "exec/devices.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

int gpu_count(std::string& reason) { return static_cast<int>(list_cuda_devices(reason).size()); }

// dp-ring with the library AllReduce on a GPU per worker trains as on two
// CPU workers with the project's ring (fp32 exact kernels; NCCL sums in
// another order: 1e-3 as the GPU device tests).
TEST(NcclTransport, DataParallelOnAGpuEachTrainsAsOnTheCpu) {
  std::string reason;
  if (gpu_count(reason) < 2) {
    GTEST_SKIP() << "needs two GPUs (NCCL refuses two ranks on one GPU): "
                 << (reason.empty() ? std::to_string(gpu_count(reason)) + " here" : reason);
  }
  strategy_runs::RunSpec cpu{.strategy = "dp-ring", .sgd = strategy_runs::kMomentum};
  strategy_runs::RunSpec gpu = cpu;
  gpu.settings = {{"algorithm", "mpi"}};
  gpu.make_device = [model = strategy_runs::model_of(gpu)](int32_t worker) {
    return make_cuda_device(model, worker, CudaPrecision::exact);
  };
  // The second run's transport sums over the communicators the first made
  // (kept, as a run's stretches between checkpoints keep them).
  gpu.make_transport = [kept = make_nccl_communicators()](int endpoints) {
    std::vector<int> gpus;
    for (int w = 0; w < endpoints; ++w) gpus.push_back(w);
    return make_nccl_transport(gpus, 30, kept);
  };
  const strategy_runs::StrategyRun reference = strategy_runs::run(cpu);
  for (const char* which : {"first run", "second run, the communicators kept"}) {
    const strategy_runs::StrategyRun run = strategy_runs::run(gpu);
    ASSERT_EQ(run.result.loss_per_iteration.size(), reference.result.loss_per_iteration.size());
    for (size_t i = 0; i < run.result.loss_per_iteration.size(); ++i) {
      EXPECT_NEAR(run.result.loss_per_iteration[i], reference.result.loss_per_iteration[i],
                  1e-3 * std::fabs(reference.result.loss_per_iteration[i]))
          << which << ", iteration " << i;
    }
    EXPECT_LT(strategy_runs::largest_weight_gap(run.result.weights, reference.result.weights), 1e-3) << which;
  }
}

}  // namespace
}  // namespace trainsim
