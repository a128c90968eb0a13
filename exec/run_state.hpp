// What a run hands the next one once its plan has drained: everything its
// workers and servers hold that outlives an iteration. A checkpoint is this,
// the losses so far and the iteration to go on from (exec/checkpoint.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "exec/tensor/layers.hpp"

namespace trainsim {

// One endpoint of a plan (a worker, or a parameter server).
struct EndpointState {
  Weights weights;        // a worker's copy of every layer; a server's table (its own layers [first, last])
  Weights velocity;       // momentum SGD's buffers (empty entries: not stepped yet, or momentum 0)
  Weights smoothed;       // SpecTrain's smoothed gradient v (workers predicting weights; else empty)
  Statistics statistics;  // a worker's running statistics (batch norm); empty for a server
};

// The plan's workers, then its servers, in the plan's order.
struct RunState {
  std::vector<EndpointState> endpoints;
};

}  // namespace trainsim
