// The GPU device's store (exec/cuda/cuda_device_store.hpp) by itself: sums
// and steps as the host's Sgd computes them, arrays back to the host added
// or copied on one wait, a buffer let go zeroed again when lent anew, a
// copy unchanged by a step after it, a sparse table's listed rows stepped,
// a peer GPU's array copied in, idle buffers freed for an array the GPU has
// no room for, and arrays charged to a worker's budget.
// Skipped without a GPU.
#include "exec/cuda/cuda_device_store.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "tests/gpu/skip_without_gpu.hpp"

namespace trainsim {
namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int64_t>(i % 13) - 6);
  return v;
}

TEST(CudaDeviceStore, StepsAsTheHostsSgdAndComesBackAddedOrCopied) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const size_t n = 1001;  // not a multiple of four
  const SgdOptions options{0.1, 0.9, 1e-4};
  Weights host_w{{Tensor({static_cast<int64_t>(n)})}};
  host_w[0][0].data = ramp(n, 0.5f);
  std::shared_ptr<KeptValues> w = store->from_host(host_w[0][0].data);
  std::shared_ptr<KeptValues> v = store->zeros(static_cast<int64_t>(n));
  Sgd sgd(options);
  for (int step = 0; step < 3; ++step) {
    Gradients g{{ParamGrad{}}};
    g[0][0].dense = Tensor({static_cast<int64_t>(n)});
    g[0][0].dense.data = ramp(n, 0.01f * static_cast<float>(step + 1));
    std::shared_ptr<KeptValues> grad = store->from_host(g[0][0].dense.data);
    store->sgd_step(*w, *grad, v.get(), options);
    sgd.step(host_w, g, 0, 0);
  }
  std::vector<float> weights(n, 0.0f), velocity(n, 1.0f);
  KeptValues* kept[] = {w.get(), v.get()};
  const std::span<float> into[] = {weights, velocity};
  store->to_host(kept, into, /*add=*/false);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(weights[i], host_w[0][0].data[i], 1e-6f * (1.0f + std::fabs(host_w[0][0].data[i]))) << i;
    EXPECT_NEAR(velocity[i], sgd.velocity()[0][0].data[i], 1e-6f * (1.0f + std::fabs(velocity[i]))) << i;
  }
  std::vector<float> twice = weights;
  KeptValues* one[] = {w.get()};
  const std::span<float> back[] = {twice};
  store->to_host(one, back, /*add=*/true);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(twice[i], 2.0f * weights[i]) << i;
  // A buffer let go comes back zeroed when lent again.
  w.reset();
  std::shared_ptr<KeptValues> again = store->zeros(static_cast<int64_t>(n));
  std::vector<float> zeros(n, 3.0f);
  KeptValues* fresh[] = {again.get()};
  const std::span<float> out[] = {zeros};
  store->to_host(fresh, out, /*add=*/false);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(zeros[i], 0.0f) << i;
}

// Arrays taken up together (through one pinned buffer, twice over) come
// back as they were given, an empty one among them.
TEST(CudaDeviceStore, ArraysTakenUpTogetherComeBackAsGiven) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  for (int round = 0; round < 2; ++round) {
    const std::vector<std::vector<float>> given = {ramp(5, 1.0f + static_cast<float>(round)), {}, ramp(4099, 0.25f)};
    const std::vector<std::span<const float>> spans(given.begin(), given.end());
    const std::vector<std::shared_ptr<KeptValues>> kept = store->from_host_all(spans);
    ASSERT_EQ(kept.size(), given.size());
    std::vector<std::vector<float>> back;
    std::vector<KeptValues*> pointers;
    for (size_t i = 0; i < given.size(); ++i) {
      back.emplace_back(given[i].size(), -1.0f);
      pointers.push_back(kept[i].get());
    }
    const std::vector<std::span<float>> into(back.begin(), back.end());
    store->to_host(pointers, into, /*add=*/false);
    EXPECT_EQ(back, given) << "round " << round;
  }
}

// A parameter server's sums on the GPU: two senders' gradients added one at
// a time, then the mean, as the host adds and scales (add_flat_gradients,
// scale_gradients) bit for bit.
TEST(CudaDeviceStore, ReceivedGradientsAddThenScaleAsTheHosts) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const size_t n = 4099;
  std::vector<float> host = ramp(n, 0.37f);
  const std::vector<float> a = ramp(n, -0.011f), b = ramp(n, 0.0029f);
  const std::shared_ptr<KeptValues> sum = store->from_host(host);
  for (const std::vector<float>* received : {&a, &b}) {
    store->add_scaled(*sum, store->from_host(*received).get(), 1.0f);
    for (size_t i = 0; i < n; ++i) host[i] += (*received)[i];
  }
  store->add_scaled(*sum, nullptr, 1.0f / 3.0f);
  for (float& v : host) v *= 1.0f / 3.0f;
  std::vector<float> back(n, -1.0f);
  KeptValues* kept[] = {sum.get()};
  const std::span<float> into[] = {back};
  store->to_host(kept, into, /*add=*/false);
  EXPECT_EQ(back, host);
}

// Parameters stepped together (two launches' worth, of odd sizes, one
// empty, one large enough for its blocks to stride) as the host's Sgd.
TEST(CudaDeviceStore, ParametersSteppedTogetherStepAsTheHostsSgd) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const SgdOptions options{0.05, 0.9, 1e-3};
  Weights host(1);
  Gradients grads(1);
  std::vector<std::shared_ptr<KeptValues>> held;
  std::vector<DeviceStore::SgdArrays> arrays;
  for (size_t p = 0; p < 41; ++p) {
    const size_t n = p == 7 ? 0 : (p == 40 ? (size_t{1} << 21) + 3 : 1 + 37 * p);
    host[0].emplace_back(std::vector<int64_t>{static_cast<int64_t>(n)});
    host[0].back().data = ramp(n, 0.25f + 0.01f * static_cast<float>(p));
    ParamGrad& g = grads[0].emplace_back();
    g.dense = Tensor({static_cast<int64_t>(n)});
    g.dense.data = ramp(n, 0.02f);
    held.push_back(store->from_host(host[0].back().data));
    held.push_back(store->from_host(g.dense.data));
    held.push_back(store->zeros(static_cast<int64_t>(n)));
    arrays.push_back({held[held.size() - 3].get(), held[held.size() - 2].get(), held.back().get()});
  }
  Sgd sgd(options);
  for (int step = 0; step < 2; ++step) {
    store->sgd_step_all(arrays, options);
    sgd.step(host, grads, 0, 0);
  }
  for (size_t p = 0; p < arrays.size(); ++p) {
    std::vector<float> weights(host[0][p].data.size(), -1.0f), velocity(weights.size(), -1.0f);
    KeptValues* kept[] = {arrays[p].weights, arrays[p].velocity};
    const std::span<float> into[] = {weights, velocity};
    store->to_host(kept, into, /*add=*/false);
    for (size_t i = 0; i < weights.size(); i += 1 + weights.size() / 50) {
      const float want = host[0][p].data[i];
      ASSERT_NEAR(weights[i], want, 1e-6f * (1.0f + std::fabs(want))) << "parameter " << p << ", value " << i;
      const float v = sgd.velocity()[0][p].data[i];
      ASSERT_NEAR(velocity[i], v, 1e-6f * (1.0f + std::fabs(v))) << "parameter " << p << ", value " << i;
    }
  }
}

// A sparse table's lazy step on the device (rows a host merge made
// distinct, each index in two floats' bytes): the listed rows step as the
// host's Sgd steps them, with momentum and weight decay or without either,
// and every other row and its velocity stay as they were.
TEST(CudaDeviceStore, ATablesListedRowsStepAsTheHostsLazyStep) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const int64_t rows = 9, width = 5;
  for (const SgdOptions& options : {SgdOptions{0.05, 0.9, 1e-3}, SgdOptions{0.05, 0.0, 0.0}}) {
    const bool momentum = options.momentum != 0;
    Weights host{{Tensor({rows, width})}};
    host[0][0].data = ramp(static_cast<size_t>(rows * width), 0.3f);
    Gradients grads(1);
    ParamGrad& g = grads[0].emplace_back();
    g.sparse = true;
    g.rows = {7, 0, 4};
    g.row_values = Tensor({3, width});
    g.row_values.data = ramp(static_cast<size_t>(3 * width), -0.02f);
    std::vector<float> indices(2 * g.rows.size());
    std::memcpy(indices.data(), g.rows.data(), g.rows.size() * sizeof(int64_t));
    const std::shared_ptr<KeptValues> w = store->from_host(host[0][0].data);
    const std::shared_ptr<KeptValues> v = momentum ? store->from_host(ramp(host[0][0].data.size(), 0.01f)) : nullptr;
    const std::shared_ptr<KeptValues> r = store->from_host(indices);
    const std::shared_ptr<KeptValues> values = store->from_host(g.row_values.data);
    Sgd sgd(options);
    if (momentum)
      sgd.set_velocity([&] {
        Weights start{{Tensor({rows, width})}};
        start[0][0].data = ramp(host[0][0].data.size(), 0.01f);
        return start;
      }());
    for (int step = 0; step < 2; ++step) {
      store->sgd_step_rows(*w, v.get(), *r, *values, 3, width, options);
      sgd.step(host, grads, 0, 0);
    }
    std::vector<float> weights(host[0][0].data.size(), -1.0f), velocity(weights.size(), -1.0f);
    std::vector<KeptValues*> kept{w.get()};
    std::vector<std::span<float>> into{weights};
    if (momentum) {
      kept.push_back(v.get());
      into.emplace_back(velocity);
    }
    store->to_host(kept, into, /*add=*/false);
    for (size_t i = 0; i < weights.size(); ++i) {
      const float want = host[0][0].data[i];
      ASSERT_NEAR(weights[i], want, 1e-6f * (1.0f + std::fabs(want))) << "value " << i;
      if (!momentum) continue;
      const float vw = sgd.velocity()[0][0].data[i];
      ASSERT_NEAR(velocity[i], vw, 1e-6f * (1.0f + std::fabs(vw))) << "value " << i;
    }
  }
}

// SpecTrain's smoothed gradient (eq. 1) and prediction (eq. 4) on the
// device, as the host's arithmetic computes them.
TEST(CudaDeviceStore, SmoothsAndPredictsAsSpecTrain) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const size_t n = 4099;
  const std::vector<float> w = ramp(n, 0.5f), g = ramp(n, 0.02f);
  std::shared_ptr<KeptValues> weights = store->from_host(w);
  std::shared_ptr<KeptValues> grad = store->from_host(g);
  std::shared_ptr<KeptValues> smoothed = store->zeros(static_cast<int64_t>(n));
  std::vector<float> v(n, 0.0f), predicted(n);
  for (int step = 0; step < 2; ++step) {
    store->smooth(*smoothed, *grad, 0.9f, 0.1f);
    for (size_t i = 0; i < n; ++i) v[i] = 0.9f * v[i] + 0.1f * g[i];
  }
  std::shared_ptr<KeptValues> out = store->predict(*weights, *smoothed, 0.3f);
  for (size_t i = 0; i < n; ++i) predicted[i] = w[i] - 0.3f * v[i];
  std::vector<float> v_back(n, -1.0f), out_back(n, -1.0f);
  KeptValues* kept[] = {smoothed.get(), out.get()};
  const std::span<float> into[] = {v_back, out_back};
  store->to_host(kept, into, /*add=*/false);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(v_back[i], v[i], 1e-6f * (1.0f + std::fabs(v[i]))) << i;
    ASSERT_NEAR(out_back[i], predicted[i], 1e-6f * (1.0f + std::fabs(predicted[i]))) << i;
  }
}

// A copy (a stashed weight version) holds the values as they were: a step
// of the original queued right after it does not reach it.
TEST(CudaDeviceStore, ACopyKeepsTheValuesAStepLaterChanges) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  const std::vector<float> given = ramp(1 << 20, 0.5f);  // large enough that a racing step would overlap the copy
  std::shared_ptr<KeptValues> w = store->from_host(given);
  std::shared_ptr<KeptValues> copy = store->copy(*w);
  std::shared_ptr<KeptValues> grad = store->from_host(ramp(given.size(), 1.0f));
  store->sgd_step(*w, *grad, nullptr, SgdOptions{0.1, 0.0, 0.0});
  std::vector<float> copied(given.size(), 0.0f), stepped(given.size(), 0.0f);
  KeptValues* kept[] = {copy.get(), w.get()};
  const std::span<float> into[] = {copied, stepped};
  store->to_host(kept, into, /*add=*/false);
  EXPECT_EQ(copied, given);
  for (size_t i = 0; i < given.size(); i += 4099) {
    EXPECT_FLOAT_EQ(stepped[i], given[i] - 0.1f * 2.0f * given[i]) << i;  // the gradient is twice the weights
  }
}

// A GPU nearly full: an array of a size no idle buffer has frees the idle
// buffers of other sizes before it gives up, and comes back zeroed.
TEST(CudaDeviceStore, AnArrayTheGpuHasNoRoomForFreesTheIdleBuffersFirst) {
  SKIP_WITHOUT_GPU();
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0);
  constexpr int64_t kFloats = int64_t{64} << 20;  // 256 MiB each
  {
    std::vector<std::shared_ptr<KeptValues>> held;
    for (int i = 0; i < 4; ++i) held.push_back(store->zeros(kFloats));
  }  // let go: 1 GiB idle in the store
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < (size_t{512} << 20)) GTEST_SKIP() << "under 512 MiB free on the GPU";
  void* hog = nullptr;  // all but 128 MiB of what is free
  if (cudaMalloc(&hog, free_bytes - (size_t{128} << 20)) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for the next test's launches
    GTEST_SKIP() << "the GPU would not lend all but 128 MiB of its free memory at once";
  }
  std::shared_ptr<KeptValues> bigger;
  EXPECT_NO_THROW(bigger = store->zeros(kFloats + 1));
  cudaFree(hog);
  (void)cudaGetLastError();  // a failure above is the EXPECT's, not the next test's
  ASSERT_NE(bigger, nullptr);
  std::vector<float> back(static_cast<size_t>(kFloats + 1), 1.0f);
  KeptValues* kept[] = {bigger.get()};
  const std::span<float> into[] = {back};
  store->to_host(kept, into, /*add=*/false);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0.0f), kFloats + 1);
}

// An array of a peer GPU's store copied in (a boundary between workers on
// two GPUs) holds the values as they were: a step of the original queued
// right after the copy does not reach it. Skipped without two GPUs that
// are peers.
TEST(CudaDeviceStore, APeerGpusArrayCopiesInAndALaterStepThereDoesNotReachIt) {
  SKIP_WITHOUT_GPU();
  std::string reason;
  if (list_cuda_devices(reason).size() < 2 || !peer_gpus(0, 1)) {
    GTEST_SKIP() << "needs GPUs 0 and 1 with peer access both ways";
  }
  const std::shared_ptr<DeviceStore> zero = make_cuda_device_store(0), one = make_cuda_device_store(1);
  const std::vector<float> given = ramp(1 << 20, 0.5f);
  std::shared_ptr<KeptValues> w = zero->from_host(given);
  std::shared_ptr<KeptValues> copy = one->copy(*w);
  std::shared_ptr<KeptValues> grad = zero->from_host(ramp(given.size(), 1.0f));
  zero->sgd_step(*w, *grad, nullptr, SgdOptions{0.1, 0.0, 0.0});
  std::vector<float> copied(given.size(), 0.0f);
  KeptValues* kept[] = {copy.get()};
  const std::span<float> into[] = {copied};
  one->to_host(kept, into, /*add=*/false);
  EXPECT_EQ(copied, given);
  EXPECT_FALSE(peer_gpus(0, 0));
}

// A store charging a budget (a virtual worker's share of the GPU): its new
// buffers charge it, idle ones stay charged until freed, an array that
// would pass it is made once the idle buffers go, and one that would pass
// it even then is refused (MemoryBudgetExceeded), nothing charged.
TEST(CudaDeviceStore, ABudgetsArraysAreChargedAndIdleOnesGoFirst) {
  SKIP_WITHOUT_GPU();
  const int64_t mib = int64_t{1} << 20;
  auto budget = std::make_shared<MemoryBudget>("worker 0, one of 4 sharing cuda:0", 3 * mib);
  const std::shared_ptr<DeviceStore> store = make_cuda_device_store(0, budget);
  std::shared_ptr<KeptValues> a = store->zeros(mib / 4);  // 1 MiB
  EXPECT_EQ(budget->held(), mib);
  a.reset();  // idle in the pool, still charged
  EXPECT_EQ(budget->held(), mib);
  std::shared_ptr<KeptValues> b = store->zeros(mib / 4 * 3);  // 3 MiB: fits once the idle one goes
  EXPECT_EQ(budget->held(), 3 * mib);
  EXPECT_THROW(store->zeros(1), MemoryBudgetExceeded);  // b is still held
  EXPECT_EQ(budget->held(), 3 * mib);
  b.reset();
  store->free_idle();
  EXPECT_EQ(budget->held(), 0);
  EXPECT_EQ(budget->peak(), 3 * mib);
}

}  // namespace
}  // namespace trainsim
