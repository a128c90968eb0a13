// Tensors a device keeps (Tensor::resident), as the GPU device keeps a
// boundary in its buffers: a CPU device that keeps every tensor it returns
// and hands back an empty one naming it trains every strategy bit for bit
// as the CPU device. The interpreter gives each kept tensor back to the
// device that made it, for the same pass, scales dL/dlogits through
// forward_loss, and brings a tensor to the host (to_host) only to send it.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exec/tensor/device.hpp"
#include "tests/exec/cpu_device_wrapper.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

struct KeptCounts {
  std::mutex mu;
  int64_t kept = 0;        // tensors returned as kept
  int64_t given_back = 0;  // kept tensors given back as an input
  int64_t to_host = 0;     // kept tensors brought to the host
  int64_t strays = 0;      // kept tensors given to another device or pass
};

class KeepingDevice final : public CpuDeviceWrapper {
 public:
  explicit KeepingDevice(KeptCounts& counts) : counts_(counts) {}

  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    Tensor in = given_back(std::move(x), pass);
    return keep(CpuDeviceWrapper::forward(network, weights, generation, pass, first, last, std::move(in), caches),
                pass);
  }
  PendingLoss forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                           int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                           std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) override {
    Tensor in = given_back(std::move(x), pass);
    const Tensor logits =
        CpuDeviceWrapper::forward(network, weights, generation, pass, first, last, std::move(in), caches);
    const double mean = loss(logits, labels, &dlogits);
    for (float& v : dlogits.data) v *= dlogits_scale;
    dlogits = keep(std::move(dlogits), pass);
    return PendingLoss(mean);
  }
  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override {
    Tensor in = given_back(std::move(dy), pass);
    return keep(
        CpuDeviceWrapper::backward(network, weights, generation, pass, first, last, std::move(in), caches, grads),
        pass);
  }
  void to_host(Tensor& t) override {
    if (t.resident == nullptr) return;
    const Kept& kept = *static_cast<const Kept*>(t.resident.get());
    const bool stray = kept.owner != this;
    Tensor value = kept.value;  // t may hold the last reference to kept
    t = std::move(value);
    std::lock_guard lock(counts_.mu);
    ++counts_.to_host;
    counts_.strays += stray;
  }

 private:
  struct Kept {
    const KeepingDevice* owner;
    PassId pass;
    Tensor value;
  };

  Tensor keep(Tensor t, PassId pass) {
    auto kept = std::make_shared<Kept>(Kept{this, pass, std::move(t)});
    Tensor out;
    out.shape = kept->value.shape;
    out.resident = kept;
    std::lock_guard lock(counts_.mu);
    ++counts_.kept;
    return out;
  }

  // A copy: DSP gives a forward's input back again to its recompute.
  Tensor given_back(Tensor t, PassId pass) {
    if (t.resident == nullptr) return t;
    const Kept& kept = *static_cast<const Kept*>(t.resident.get());
    std::lock_guard lock(counts_.mu);
    ++counts_.given_back;
    counts_.strays += kept.owner != this || kept.pass != pass;
    return kept.value;
  }

  KeptCounts& counts_;
};

int64_t boundary_sends(const Plan& plan) {
  int64_t sends = 0;
  for (const Op& op : plan.ops) {
    sends += op.kind == OpKind::kSend && (op.payload == Payload::kActivation || op.payload == Payload::kInputGradient);
  }
  return sends;
}

class ResidentTensors : public testing::TestWithParam<strategy_runs::StrategyCase> {};

TEST_P(ResidentTensors, ADeviceKeepingItsTensorsTrainsAsTheCpu) {
  const RunSpec& spec = GetParam().spec;
  KeptCounts counts;
  RunSpec keeping = spec;
  keeping.make_device = [&](int32_t) { return std::make_unique<KeepingDevice>(counts); };
  const StrategyRun reference = strategy_runs::run(spec);
  const StrategyRun run = strategy_runs::run(keeping);
  EXPECT_EQ(run.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(strategy_runs::largest_weight_gap(run.result.weights, reference.result.weights), 0.0);
  EXPECT_EQ(counts.strays, 0);
  EXPECT_EQ(counts.to_host, boundary_sends(run.plan));
  EXPECT_GT(counts.given_back, 0);  // at least each last forward's dL/dlogits to its backward
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, ResidentTensors, testing::ValuesIn(strategy_runs::cases()),
                         [](const testing::TestParamInfo<strategy_runs::StrategyCase>& p) { return p.param.name; });

}  // namespace
}  // namespace trainsim
