// PipeDream weight stashing: the backward sees its forward's weights, and in a
// 1F1B steady state stage s of S holds S − s versions.
#include "exec/optim/weight_stash.hpp"

#include <gtest/gtest.h>

namespace trainsim {
namespace {

// A model of `layers` one-parameter layers, every value `value`.
Weights constant_weights(int64_t layers, float value) {
  Weights weights(static_cast<size_t>(layers));
  for (auto& params : weights) {
    Tensor t({1});
    t.data = {value};
    params.push_back(t);
  }
  return weights;
}

TEST(WeightStash, BackwardSeesTheWeightsItsForwardUsed) {
  Weights weights = constant_weights(3, 1.0f);
  WeightStash stash(1, 2);
  stash.push(/*batch=*/7, /*version=*/0, weights);
  weights[1][0].data[0] = 5.0f;  // an update after the forward of batch 7
  EXPECT_EQ(stash.weights_for(7)[1][0].data[0], 1.0f);
  EXPECT_EQ(stash.version_of(7), 0);
  EXPECT_TRUE(stash.weights_for(7)[0].empty());  // layer 0 is outside the stage
  stash.release(7);
  EXPECT_EQ(stash.versions_held(), 0);
  EXPECT_EQ(stash.batches_in_flight(), 0);
}

TEST(WeightStash, BatchesOfOneVersionShareOneCopy) {
  const Weights weights = constant_weights(1, 2.0f);
  WeightStash stash(0, 0);
  stash.push(0, 3, weights);
  stash.push(1, 3, weights);
  EXPECT_EQ(stash.versions_held(), 1);
  EXPECT_EQ(stash.batches_in_flight(), 2);
  stash.release(0);
  EXPECT_EQ(stash.versions_held(), 1);  // batch 1 still needs version 3
  stash.release(1);
  EXPECT_EQ(stash.versions_held(), 0);
}

TEST(WeightStash, OneFOneBSteadyStateHoldsSMinusSVersionsOnStageS) {
  // PipeDream 1F1B on S = 4 stages, stage s = layer s. Stage s first runs
  // S − s − 1 warm-up forwards (all on version 0: nothing was updated yet),
  // then rounds r = 0, 1, ... of "forward batch S−s−1+r, backward batch r,
  // update". Forward of batch S−s−1+j runs on version j, so after the forward
  // of round r the in-flight batches r .. S−s−1+r hold:
  //   r <  S−s−1: batches r..S−s−2 share version 0, the others versions 0..r -> r + 1 versions;
  //   r >= S−s−1: every in-flight batch has its own version              -> S − s versions.
  // The update adds 1 to the weight, so version v's weight value is v.
  constexpr int64_t kStages = 4;
  for (int64_t stage = 0; stage < kStages; ++stage) {
    Weights weights = constant_weights(kStages, 0.0f);
    WeightStash stash(stage, stage);
    int64_t version = 0;
    const int64_t warmup = kStages - stage - 1;
    for (int64_t batch = 0; batch < warmup; ++batch) stash.push(batch, version, weights);
    for (int64_t round = 0; round < 3 * kStages; ++round) {
      stash.push(warmup + round, version, weights);
      const int64_t expected = round < warmup ? round + 1 : kStages - stage;
      EXPECT_EQ(stash.versions_held(), expected) << "stage " << stage << " round " << round;
      EXPECT_EQ(stash.batches_in_flight(), kStages - stage);
      // Backward of the oldest batch: its weights are those of its forward.
      const int64_t forward_version = round < warmup ? 0 : round - warmup;
      EXPECT_EQ(stash.version_of(round), forward_version);
      EXPECT_EQ(stash.weights_for(round)[stage][0].data[0], static_cast<float>(forward_version));
      stash.release(round);
      weights[stage][0].data[0] += 1.0f;
      ++version;
    }
  }
}

}  // namespace
}  // namespace trainsim
