// The weight versions a worker's compute ops read, as each op's policy says
// (sim/plan/plan.hpp's WeightPolicy): the live weights; a stashed version
// (PipeDream's weight stashing, DSP's backward parameters), stored once per
// version and dropped when the last op to read it has; or SpecTrain's
// prediction (seed 000 eq. 4). The readers of each version are counted from
// the plan before the run, so a version is kept exactly as long as needed.
#pragma once

#include <cstdint>

#include "exec/interpreter/worker_state.hpp"

namespace trainsim::interp {

// Whether ops of `kind` read weights (forward, backward, recompute).
bool reads_weights(OpKind kind);

// Before the run: `op` will read its weight version on `w`: the parameters
// of its layers of `network` (for a backward, of those whose backward reads
// them).
void count_reader(WorkerState& w, const Op& op, const Network& network);

// The weights compute op `op` of `w` reads: live, stashed, or (SpecTrain)
// predicted into the worker's buffer s = weight_ahead versions ahead of the
// worker's: Ŵ = W − s·η·v (seed 000 eq. 4), the op's layers only (the
// worker's compute ops run one at a time, so one buffer serves them all).
// logic_error if the plan asks for a version the worker does not hold.
// `only` narrows a prediction (SpecTrain::Only).
const Weights& select_weights(WorkerState& w, const Op& op, const SpecTrain::Only& only = {});

// The generation of the weights select_weights gives `op`: the live
// weights' or its stash's, kUnversionedWeights for a prediction.
WeightsGeneration generation_of(WorkerState& w, const Op& op);

// After `op` read its version: drops the stash once no reader is left.
void done_reading(WorkerState& w, const Op& op, const Network& network);

// Before the weights change (an update, an install of received weights):
// keeps the current version for the ops that will still read it, copying
// only the layers they will read (an embedding table whose forward is done
// and whose backward is left is not copied: its entry in the stash is
// empty); the next version and generation follow.
void stash_before_change(WorkerState& w);

}  // namespace trainsim::interp
