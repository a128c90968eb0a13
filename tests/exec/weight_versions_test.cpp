// The interpreter's weight versions (exec/interpreter/weight_versions.hpp):
// a stashed version is stored once, read by every op that names it although
// later updates changed the live weights, and dropped when its last reader
// is done; as PipeDream's weight stashing keeps one copy per version in
// flight (Narayanan et al., SOSP 2019, §3.3).
#include "exec/interpreter/weight_versions.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>

namespace trainsim::interp {
namespace {

// A layer for the bookkeeping only: whether its backward reads its parameters.
class StubLayer final : public ExecLayer {
 public:
  explicit StubLayer(bool backward_reads) : backward_reads_(backward_reads) {}
  bool backward_reads_params() const override { return backward_reads_; }
  Tensor forward(const LayerParams&, const Tensor& x, LayerCache&) const override { return x; }
  Tensor backward(const LayerParams&, const Tensor& dy, const LayerCache&, LayerGrads&) const override { return dy; }

 private:
  bool backward_reads_;
};

// Layers whose backwards read their parameters (a dense layer's do) or not (an embedding's).
Network stub_network(std::initializer_list<bool> backward_reads) {
  Network n;
  for (bool reads : backward_reads) n.layers.push_back(std::make_unique<StubLayer>(reads));
  return n;
}

const Network& one_layer() {
  static const Network network = stub_network({true});
  return network;
}

// One one-parameter layer, its value `value`.
Weights scalar_weights(float value) {
  Tensor t({1});
  t.data = {value};
  return Weights{LayerParams{t}};
}

Op reader(OpKind kind, int32_t version, WeightPolicy policy = WeightPolicy::kStashed) {
  Op op;
  op.kind = kind;
  op.weights = policy;
  op.weight_version = version;
  op.first_layer = 0;
  op.last_layer = 0;
  return op;
}

// An update: the live weights move to the next version, value + 1.
void update(WorkerState& w) {
  stash_before_change(w);
  w.weights[0][0].data[0] += 1.0f;
}

TEST(WeightVersions, BackwardReadsTheVersionItsForwardRead) {
  WorkerState w;
  w.device = std::make_unique<EigenCpuDevice>();  // where a stash finds the weights
  w.weights = scalar_weights(0.0f);
  const Op forward = reader(OpKind::kForward, 0);
  const Op backward = reader(OpKind::kBackward, 0);
  count_reader(w, forward, one_layer());
  count_reader(w, backward, one_layer());
  count_reader(w, reader(OpKind::kUpdate, 0), one_layer());  // not a reader
  EXPECT_EQ(select_weights(w, forward)[0][0].data[0], 0.0f);
  done_reading(w, forward, one_layer());
  update(w);  // version 0 still has a reader: stashed
  EXPECT_EQ(w.version, 1);
  EXPECT_EQ(w.snapshots.size(), 1u);
  EXPECT_EQ(select_weights(w, backward)[0][0].data[0], 0.0f);
  EXPECT_EQ(w.weights[0][0].data[0], 1.0f);
  done_reading(w, backward, one_layer());
  EXPECT_TRUE(w.snapshots.empty());  // its last reader is done
}

// An embedding table (layer 0) read by its forward now and its backward
// later, and a dense layer (1) likewise: the stash copies the dense layer,
// whose backward reads it, not the table.
TEST(WeightVersions, AStashCopiesOnlyTheLayersItsReadersRead) {
  const Network network = stub_network({false, true});
  WorkerState w;
  w.device = std::make_unique<EigenCpuDevice>();  // where a stash finds the weights
  Tensor table({1000});
  Tensor dense({2});
  dense.data = {1.0f, 2.0f};
  w.weights = Weights{LayerParams{table}, LayerParams{dense}};
  Op forward = reader(OpKind::kForward, 0);
  forward.last_layer = 1;
  Op backward = reader(OpKind::kBackward, 0);
  backward.last_layer = 1;
  count_reader(w, forward, network);
  count_reader(w, backward, network);
  select_weights(w, forward);
  done_reading(w, forward, network);
  update(w);  // the backward of version 0 is still to come
  ASSERT_EQ(w.snapshots.size(), 1u);
  const Weights& stash = select_weights(w, backward);
  EXPECT_TRUE(stash[0].empty());
  ASSERT_EQ(stash[1].size(), 1u);
  EXPECT_EQ(stash[1][0].data, (std::vector<float>{1.0f, 2.0f}));
  // A recompute reads every layer of its range, the table included.
  WorkerState v;
  v.device = std::make_unique<EigenCpuDevice>();
  v.weights = w.weights;
  Op recompute = reader(OpKind::kRecompute, 0);
  recompute.last_layer = 1;
  count_reader(v, recompute, network);
  stash_before_change(v);
  EXPECT_EQ(select_weights(v, recompute)[0][0].size(), 1000);
}

TEST(WeightVersions, AVersionWithoutReadersLeftIsNotStashed) {
  WorkerState w;
  w.device = std::make_unique<EigenCpuDevice>();  // where a stash finds the weights
  w.weights = scalar_weights(0.0f);
  const Op forward = reader(OpKind::kForward, 0);
  count_reader(w, forward, one_layer());
  select_weights(w, forward);
  done_reading(w, forward, one_layer());
  update(w);
  EXPECT_TRUE(w.snapshots.empty());
  // A later op naming the dropped version is a plan bug.
  EXPECT_THROW(select_weights(w, forward), std::logic_error);
  // The live version reads the live weights, whatever the policy.
  EXPECT_EQ(select_weights(w, reader(OpKind::kForward, 1, WeightPolicy::kLatest))[0][0].data[0], 1.0f);
  EXPECT_THROW(select_weights(w, reader(OpKind::kForward, 0, WeightPolicy::kLatest)), std::logic_error);
}

TEST(WeightVersions, OneFOneBSteadyStateHoldsSMinusSVersionsOnStageS) {
  // PipeDream 1F1B on S = 4 stages: stage s runs S − s − 1 warm-up forwards
  // on version 0, then rounds r of "forward batch S−s−1+r, backward batch r,
  // update". Forward of batch b reads version max(0, b − (S−s−1)) and its
  // backward the same version, so once the pipeline is full the stage keeps
  // the versions of its S − s in-flight batches: the live one and S − s − 1
  // stashed.
  constexpr int32_t kStages = 4;
  constexpr int32_t kRounds = 3 * kStages;
  for (int32_t stage = 0; stage < kStages; ++stage) {
    WorkerState w;
    w.device = std::make_unique<EigenCpuDevice>();  // where a stash finds the weights
    w.weights = scalar_weights(0.0f);
    const int32_t warmup = kStages - stage - 1;
    const auto version_of = [warmup](int32_t batch) { return std::max(0, batch - warmup); };
    for (int32_t batch = 0; batch < warmup + kRounds; ++batch) {
      count_reader(w, reader(OpKind::kForward, version_of(batch)), one_layer());
      count_reader(w, reader(OpKind::kBackward, version_of(batch)), one_layer());
    }
    const auto forward = [&](int32_t batch) {
      EXPECT_EQ(select_weights(w, reader(OpKind::kForward, version_of(batch)))[0][0].data[0],
                static_cast<float>(version_of(batch)));
      done_reading(w, reader(OpKind::kForward, version_of(batch)), one_layer());
    };
    for (int32_t batch = 0; batch < warmup; ++batch) forward(batch);
    for (int32_t round = 0; round < kRounds; ++round) {
      forward(warmup + round);
      // Backward of the oldest batch: the weights of its forward.
      EXPECT_EQ(select_weights(w, reader(OpKind::kBackward, version_of(round)))[0][0].data[0],
                static_cast<float>(version_of(round)))
          << "stage " << stage << " round " << round;
      done_reading(w, reader(OpKind::kBackward, version_of(round)), one_layer());
      update(w);
      const size_t stashed = static_cast<size_t>(std::min(round + 1, warmup));
      EXPECT_EQ(w.snapshots.size(), stashed) << "stage " << stage << " round " << round;
    }
  }
}

}  // namespace
}  // namespace trainsim::interp
