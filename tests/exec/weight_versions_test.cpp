// The interpreter's weight versions (exec/interpreter/weight_versions.hpp):
// a stashed version is stored once, read by every op that names it although
// later updates changed the live weights, and dropped when its last reader
// is done; as PipeDream's weight stashing keeps one copy per version in
// flight (Narayanan et al., SOSP 2019, §3.3).
#include "exec/interpreter/weight_versions.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace trainsim::interp {
namespace {

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
  w.weights = scalar_weights(0.0f);
  const Op forward = reader(OpKind::kForward, 0);
  const Op backward = reader(OpKind::kBackward, 0);
  count_reader(w, forward);
  count_reader(w, backward);
  count_reader(w, reader(OpKind::kUpdate, 0));  // not a reader
  EXPECT_EQ(select_weights(w, forward)[0][0].data[0], 0.0f);
  done_reading(w, 0);
  update(w);  // version 0 still has a reader: stashed
  EXPECT_EQ(w.version, 1);
  EXPECT_EQ(w.snapshots.size(), 1u);
  EXPECT_EQ(select_weights(w, backward)[0][0].data[0], 0.0f);
  EXPECT_EQ(w.weights[0][0].data[0], 1.0f);
  done_reading(w, 0);
  EXPECT_TRUE(w.snapshots.empty());  // its last reader is done
}

TEST(WeightVersions, AVersionWithoutReadersLeftIsNotStashed) {
  WorkerState w;
  w.weights = scalar_weights(0.0f);
  const Op forward = reader(OpKind::kForward, 0);
  count_reader(w, forward);
  select_weights(w, forward);
  done_reading(w, 0);
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
    w.weights = scalar_weights(0.0f);
    const int32_t warmup = kStages - stage - 1;
    const auto version_of = [warmup](int32_t batch) { return std::max(0, batch - warmup); };
    for (int32_t batch = 0; batch < warmup + kRounds; ++batch) {
      count_reader(w, reader(OpKind::kForward, version_of(batch)));
      count_reader(w, reader(OpKind::kBackward, version_of(batch)));
    }
    const auto forward = [&](int32_t batch) {
      EXPECT_EQ(select_weights(w, reader(OpKind::kForward, version_of(batch)))[0][0].data[0],
                static_cast<float>(version_of(batch)));
      done_reading(w, version_of(batch));
    };
    for (int32_t batch = 0; batch < warmup; ++batch) forward(batch);
    for (int32_t round = 0; round < kRounds; ++round) {
      forward(warmup + round);
      // Backward of the oldest batch: the weights of its forward.
      EXPECT_EQ(select_weights(w, reader(OpKind::kBackward, version_of(round)))[0][0].data[0],
                static_cast<float>(version_of(round)))
          << "stage " << stage << " round " << round;
      done_reading(w, version_of(round));
      update(w);
      const size_t stashed = static_cast<size_t>(std::min(round + 1, warmup));
      EXPECT_EQ(w.snapshots.size(), stashed) << "stage " << stage << " round " << round;
    }
  }
}

}  // namespace
}  // namespace trainsim::interp
