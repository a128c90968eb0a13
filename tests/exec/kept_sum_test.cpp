// The library AllReduce where the devices keep the gradients' sums
// (Device::all_reduce_kept, Transport::all_reduce_kept: NCCL's on the
// members' GPUs), over the CPU stand-in of a GPU network
// (tests/exec/buffered_cpu_network.hpp) and a transport whose library sums
// as the ring, the host's values or the kept arrays alike: every strategy
// with a library AllReduce trains bit for bit as on the host, and no
// gradient comes to the host for it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/tensor/kept_training.hpp"
#include "exec/transport/collectives.hpp"
#include "exec/transport/in_process.hpp"
#include "tests/exec/buffered_cpu_network.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using buffered::kept_values;

// In-process messages; the library AllReduce as the ring, of the host's
// values or, where the devices keep them, of the kept arrays side by side:
// the same values summed in the same order either way.
class KeptRingTransport final : public InProcessTransport {
 public:
  KeptRingTransport(int workers, std::atomic<int64_t>& kept_sums)
      : InProcessTransport(workers, 30), kept_sums_(kept_sums) {}
  bool has_library_all_reduce() const override { return true; }
  bool sums_kept(const std::vector<int>&) const override { return true; }

 protected:
  void run_all_reduce(CollectivePeers& peers, std::span<float> data, CollectiveAlgorithm algorithm) override {
    Transport::run_all_reduce(peers, data,
                              algorithm == CollectiveAlgorithm::kLibrary ? CollectiveAlgorithm::kRing : algorithm);
  }
  void run_all_reduce_kept(CollectivePeers& peers, std::span<KeptValues* const> arrays, int64_t floats,
                           float scale) override {
    std::vector<float> flat;
    for (KeptValues* a : arrays) {
      const std::vector<float>& values = kept_values(*a).data;
      flat.insert(flat.end(), values.begin(), values.end());
    }
    TRAINSIM_CHECK(static_cast<int64_t>(flat.size()) == floats, "kept arrays of another size than said");
    Transport::run_all_reduce(peers, flat, CollectiveAlgorithm::kRing);
    size_t at = 0;
    for (KeptValues* a : arrays) {
      for (float& v : kept_values(*a).data) v = flat[at++] * scale;
    }
    ++kept_sums_;
  }

 private:
  std::atomic<int64_t>& kept_sums_;
};

struct KeptSumCase {
  std::string name;
  strategy_runs::RunSpec spec;
  bool kept = true;     // every AllReduce of kept sums: none of the range's gradients sparse, or dense_only
  bool stepped = true;  // every update on the device from sums that never come to the host
  bool rows = false;    // a sparse table's rows among them (Sgd's lazy step on the device)
};

class KeptSum : public testing::TestWithParam<KeptSumCase> {};

TEST_P(KeptSum, TrainsAsOnTheHostWithoutTheGradientsComingBack) {
  std::atomic<int64_t> kept_sums{0};
  strategy_runs::RunSpec spec = GetParam().spec;
  spec.make_transport = [&](int endpoints) { return std::make_unique<KeptRingTransport>(endpoints, kept_sums); };
  const strategy_runs::StrategyRun host = strategy_runs::run(spec);  // the CPU device keeps no sums
  ASSERT_EQ(kept_sums.load(), 0);

  BufferCounts counts;
  auto store = std::make_shared<CountingStore>(counts);
  spec.make_device = [&](int32_t) {
    return make_lending_device(
        [&counts](const Network& network, int64_t batch, const HeldLayers& held) {
          return std::make_unique<BufferedCpuNetwork>(network, batch, counts, nullptr, &held);
        },
        store);
  };
  const strategy_runs::StrategyRun kept = strategy_runs::run(spec);
  EXPECT_EQ(kept.result.loss_per_iteration, host.result.loss_per_iteration);
  EXPECT_EQ(strategy_runs::largest_weight_gap(kept.result.weights, host.result.weights), 0.0);
  const int64_t all_reduces = buffered::ops_of(kept.plan, OpKind::kAllReduce);
  ASSERT_GT(all_reduces, 0);
  EXPECT_EQ(kept_sums.load(), GetParam().kept ? all_reduces : 0);
  if (GetParam().stepped) {
    // Each sum the backwards formed stays on the device, through the
    // AllReduce into the step: none comes to the host.
    EXPECT_EQ(counts.sums_back, 0);
    EXPECT_GT(counts.steps, 0);
    EXPECT_EQ(counts.row_steps > 0, GetParam().rows);
  } else {
    EXPECT_GT(counts.sums_back, 0);  // for a push to the servers, or the table's AllReduce
  }
}

std::vector<KeptSumCase> kept_sum_cases() {
  const std::pair<std::string, std::string> library{"algorithm", "mpi"};
  const SgdOptions momentum{0.1, 0.9, 0.0};
  return {
      {"dp_ring", {.strategy = "dp-ring", .settings = {library}, .sgd = momentum}},
      {"dp_ring_four", {.strategy = "dp-ring", .settings = {library}, .per_machine = 4}},
      {"dp_overlap", {.strategy = "dp-overlap", .settings = {library, {"bucket_bytes", "20000"}}, .sgd = momentum}},
      {"pipesgd", {.strategy = "pipesgd", .settings = {library, {"width", "2"}}, .sgd = momentum}},
      // The dense variables alone (dense_only): the sparse table's rows go
      // to the servers, its weights pulled from them, or around the ring as
      // rows, which the device's step of the table takes up.
      {"parallax_hybrid",
       {.strategy = "parallax", .settings = {library, {"mode", "hybrid"}}, .text = true},
       true,
       true},
      {"parallax_ar", {.strategy = "parallax", .settings = {library, {"mode", "ar"}}, .text = true}, true, true, true},
      // The whole model, the sparse table densified: on the host. The
      // table's gradient then dense, its step is the device's, and the next
      // AllReduce densifies beside weights the device keeps (by their shape).
      {"dp_ring_table", {.strategy = "dp-ring", .settings = {library}, .text = true}, false, false},
      {"dp_ring_table_by_ring", {.strategy = "dp-ring", .text = true}, false, false},
  };
}

INSTANTIATE_TEST_SUITE_P(LibraryAllReduce, KeptSum, testing::ValuesIn(kept_sum_cases()),
                         [](const testing::TestParamInfo<KeptSumCase>& p) { return p.param.name; });

// The gradients of layers 0 (on the host), 2 (kept, with a host part
// beside it) and, with `sparse`, 3 (a table's rows, after the others).
struct ThreeLayers {
  BufferCounts counts;
  std::shared_ptr<CountingStore> store = std::make_shared<CountingStore>(counts);
  KeptTraining kept{store};
  Gradients grads = Gradients(4);

  explicit ThreeLayers(bool sparse) {
    grads[0].emplace_back().dense = Tensor({2});
    grads[0][0].dense.data = {1, 2};
    grads[2].emplace_back().dense = Tensor({3});
    {
      KeptTraining::Targets targets(kept, grads, 2, 2);
      kept_values(*static_cast<KeptValues*>(targets.into[2][0].dense.resident.get())).data = {3, 4, 5};
    }
    grads[2][0].dense.data = {1, 1, 1};
    if (sparse) {
      ParamGrad& table = grads[3].emplace_back();
      table.sparse = true;
      table.rows = {4};
      table.row_values = Tensor({1, 2});
      table.row_values.data = {7, 8};
    }
  }
};

// What a sum saw of each array, each then times 10.
struct RecordedSum {
  std::vector<std::vector<float>> arrays;
  int64_t floats = -1;
  SumKept sum() {
    return [this](std::span<KeptValues* const> kept, int64_t n) {
      floats = n;
      for (KeptValues* a : kept) {
        arrays.push_back(kept_values(*a).data);
        for (float& v : kept_values(*a).data) v *= 10;
      }
    };
  }
};

TEST(KeptTrainingAllReduce, HandsEveryDenseGradientWholeInTheHostsOrderAndKeepsTheSum) {
  ThreeLayers t(false);
  RecordedSum recorded;
  ASSERT_TRUE(t.kept.all_reduce(t.grads, 0, 3, false, recorded.sum()));
  // Layer 0 taken up from the host, layer 2's host part added to its sum.
  EXPECT_EQ(recorded.arrays, (std::vector<std::vector<float>>{{1, 2}, {4, 5, 6}}));
  EXPECT_EQ(recorded.floats, 5);
  EXPECT_EQ(t.grads[0][0].dense.data, (std::vector<float>{0, 0}));
  EXPECT_EQ(t.grads[2][0].dense.data, (std::vector<float>{0, 0, 0}));
  EXPECT_NE(t.grads[0][0].kept, nullptr);
  EXPECT_NE(t.grads[2][0].kept, nullptr);
  // Layer 2's sum came to the host to meet its host part, then both went up together.
  EXPECT_EQ(t.counts.sums_back, 1);
  EXPECT_EQ(t.counts.from_host, 2);
  t.kept.gradients_to_host(t.grads, 0, 3);
  EXPECT_EQ(t.grads[0][0].dense.data, (std::vector<float>{10, 20}));
  EXPECT_EQ(t.grads[2][0].dense.data, (std::vector<float>{40, 50, 60}));
}

TEST(KeptTrainingAllReduce, ASparseGradientLeavesTheRangeToTheHostUnlessTheDenseAloneAreSummed) {
  ThreeLayers t(true);
  RecordedSum recorded;
  EXPECT_FALSE(t.kept.all_reduce(t.grads, 0, 3, false, recorded.sum()));
  EXPECT_EQ(recorded.floats, -1);  // never called
  EXPECT_EQ(t.grads[0][0].dense.data, (std::vector<float>{1, 2}));
  EXPECT_EQ(t.grads[0][0].kept, nullptr);
  EXPECT_NE(t.grads[2][0].kept, nullptr);  // nothing brought back either
  EXPECT_EQ(t.counts.from_host, 0);
  EXPECT_EQ(t.counts.sums_back, 0);

  ASSERT_TRUE(t.kept.all_reduce(t.grads, 0, 3, true, recorded.sum()));
  EXPECT_EQ(recorded.arrays, (std::vector<std::vector<float>>{{1, 2}, {4, 5, 6}}));
  EXPECT_EQ(t.grads[3][0].row_values.data, (std::vector<float>{7, 8}));  // the table's rows as they were
  EXPECT_EQ(t.grads[3][0].kept, nullptr);
}

TEST(KeptTrainingAllReduce, ADeviceThatKeepsNoSumsLeavesItToTheHost) {
  EigenCpuDevice cpu;
  ThreeLayers t(false);
  t.kept.gradients_to_host(t.grads, 2, 2);
  RecordedSum recorded;
  EXPECT_FALSE(cpu.all_reduce_kept(t.grads, 0, 3, false, recorded.sum()));
  EXPECT_EQ(recorded.floats, -1);
}

}  // namespace
}  // namespace trainsim
