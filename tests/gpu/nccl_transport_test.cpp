// The NCCL transport (make_nccl_transport): workers each on a GPU of their
// own, the library AllReduce by NCCL. Training needs two GPUs or more (NCCL
// refuses two ranks on one GPU), so it skips with the reason on machines of
// fewer; its refusals are tested everywhere (tests/exec/nccl_transport_errors_test.cpp).
// dp-ring's AllReduce sums there the gradients each GPU's store keeps
// (Transport::all_reduce_kept); arrays pass from one GPU's store to the
// other's by NCCL's send and receive (Transport::pass_kept).
#include "exec/cuda/nccl_transport.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/cuda_device_store.hpp"
#include "exec/devices.hpp"
#include "exec/tensor/range_network.hpp"
#include "exec/transport/in_process.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

// Why a test of two GPUs cannot run here, or empty.
std::string two_gpus_missing() {
  std::string reason;
  const size_t gpus = list_cuda_devices(reason).size();
  if (gpus >= 2) return "";
  return "needs two GPUs (NCCL refuses two ranks on one GPU): " +
         (reason.empty() ? std::to_string(gpus) + " here" : reason);
}

// dp-ring with the library AllReduce on a GPU per worker trains as on two
// CPU workers with the project's ring (fp32 exact kernels; NCCL sums in
// another order: 1e-3 as the GPU device tests).
TEST(NcclTransport, DataParallelOnAGpuEachTrainsAsOnTheCpu) {
  if (const std::string missing = two_gpus_missing(); !missing.empty()) GTEST_SKIP() << missing;
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

// Arrays each GPU's store keeps, summed where they are: the same bits as
// the host's values summed by the same library AllReduce and scaled on the
// host (one flat buffer of the same size either way).
TEST(NcclTransport, ArraysTheStoresKeepSumAsTheHostsValuesDo) {
  if (const std::string missing = two_gpus_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::vector<int> group{0, 1};
  const std::vector<int64_t> sizes{3, 100000, 0, 77};
  const auto values = [&](int worker, size_t array) {
    std::vector<float> v(static_cast<size_t>(sizes[array]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>((i * 7 + array * 13 + worker * 5) % 101) - 3;
    return v;
  };
  const std::unique_ptr<Transport> transport = make_nccl_transport(group, 30);
  std::vector<std::vector<float>> host(2), kept(2);
  run_workers(*transport, 2, [&](int w) {
    std::vector<float> flat;
    for (size_t a = 0; a < sizes.size(); ++a) {
      const std::vector<float> v = values(w, a);
      flat.insert(flat.end(), v.begin(), v.end());
    }
    transport->all_reduce(w, group, 1, flat, CollectiveAlgorithm::kLibrary);
    for (float& v : flat) v *= 0.5f;
    host[static_cast<size_t>(w)] = flat;

    const std::shared_ptr<DeviceStore> store = make_cuda_device_store(w);
    std::vector<std::shared_ptr<KeptValues>> arrays;
    std::vector<KeptValues*> raw;
    int64_t floats = 0;
    for (size_t a = 0; a < sizes.size(); ++a) {
      arrays.push_back(store->from_host(values(w, a)));
      raw.push_back(arrays.back().get());
      floats += sizes[a];
    }
    transport->all_reduce_kept(w, group, 2, raw, floats, 0.5f);
    std::vector<float> back(static_cast<size_t>(floats));
    std::vector<std::span<float>> into;
    int64_t at = 0;
    for (const int64_t n : sizes) {
      into.emplace_back(back.data() + at, static_cast<size_t>(n));
      at += n;
    }
    store->to_host(raw, into, /*add=*/false);
    kept[static_cast<size_t>(w)] = back;
  });
  EXPECT_EQ(kept[0], host[0]);
  EXPECT_EQ(kept[1], host[1]);
  EXPECT_EQ(kept[0], kept[1]);
}

// Arrays of GPU 0's store passed to GPU 1's by NCCL's send and receive
// (the path of a boundary between GPUs that are not peers), taken last
// first: each arrives whole under its own tag, the host carrying none of it.
TEST(NcclTransport, ArraysPassFromGpuToGpuUnderTheirTags) {
  if (const std::string missing = two_gpus_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::unique_ptr<Transport> transport = make_nccl_transport({0, 1}, 30);
  ASSERT_TRUE(transport->passes_kept(0, 1));
  transport->open_kept_paths({{0, 1}});
  const std::shared_ptr<DeviceStore> sender = make_cuda_device_store(0);
  const std::shared_ptr<DeviceStore> receiver = make_cuda_device_store(1);
  const std::vector<int64_t> tags{10, 11, 12};
  const std::vector<int64_t> sizes{3, 100000, 7};
  const auto values = [&](size_t k) {
    std::vector<float> v(static_cast<size_t>(sizes[k]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(tags[k] * 1000 + static_cast<int64_t>(i % 997));
    return v;
  };
  for (size_t k = 0; k < tags.size(); ++k) {
    const ExportedBoundary array{sender, sender->from_host(values(k)), 0};
    transport->pass_kept(0, 1, tags[k], array, sizes[k]);
  }
  for (const size_t k : {2, 0, 1}) {
    const PassedKept passed = transport->take_kept(1, 0, tags[k], [&](int64_t floats) {
      return std::make_shared<ExportedBoundary>(ExportedBoundary{receiver, receiver->uninitialized(floats), 1});
    });
    ASSERT_EQ(passed.floats, sizes[k]);
    std::vector<float> back(static_cast<size_t>(passed.floats));
    KeptValues* raw[] = {passed.array->values.get()};
    const std::span<float> into[] = {back};
    receiver->to_host(raw, into, /*add=*/false);
    EXPECT_EQ(back, values(k)) << "tag " << tags[k];
  }
}

}  // namespace
}  // namespace trainsim
