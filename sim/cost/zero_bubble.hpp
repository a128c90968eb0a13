// ZB-H1's schedule (Qi et al. 2023, "Zero Bubble Pipeline Parallelism",
// §3.1), shared by its cost model (sim/cost/zb_h1.cpp) and its plan
// (sim/plan/zb_h1.cpp): every backward split into its input gradient (B),
// which the stage before waits for, and its weight gradients (W), which only
// the update waits for.
#pragma once

#include <cstdint>
#include <vector>

namespace trainsim {

// A stage's task: a micro-batch's forward, its B or its W.
struct ZeroBubbleTask {
  enum Kind { kForward, kInput, kWeights };
  Kind kind = kForward;
  int32_t microbatch = 0;
};

// Stage `stage` of K = `stages` for M micro-batches, in order: 1F1B's
// min(K − k − 1, M) forwards of warm-up, a forward and a B in turn, the
// remaining Bs; after each B the oldest pending Ws while more than k are
// pending; the rest after the last B. Stage k never holds more than K
// micro-batches from their forward to their W, the first stage's peak
// under 1F1B.
std::vector<ZeroBubbleTask> zb_h1_order(int32_t stages, int32_t stage, int32_t microbatches);

}  // namespace trainsim
