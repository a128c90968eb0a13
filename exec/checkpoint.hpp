// Checkpoints of a training run (trainsim run --checkpoint DIR
// --checkpoint-every N, --resume DIR): what the run's workers and servers
// hold once its plan has drained, the losses so far and the iteration to go
// on from, written atomically with a checksum.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/run_state.hpp"

namespace trainsim {

struct Checkpoint {
  // What a resumed run must share with the one that wrote it (model,
  // strategy, settings, workers, batch, seed, optimizer): any JSON object.
  nlohmann::json identity = nlohmann::json::object();
  int32_t next_iteration = 0;   // the first iteration not yet run
  std::vector<double> losses;   // mean loss of each iteration run so far
  RunState state;
};

// The file a checkpoint directory holds.
std::string checkpoint_path(const std::string& dir);

// Writes `dir`/checkpoint (making `dir` if needed): into a temporary file
// beside it, flushed to disk, then renamed over the old one, so a run killed
// while writing leaves the previous checkpoint whole. A CRC-32 of the
// contents ends the file. InputError("--checkpoint", ...) when it cannot.
void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint);

// Reads `dir`/checkpoint. InputError("--resume", ...) when it is missing, not
// a checkpoint, truncated, or its contents do not match their checksum.
Checkpoint read_checkpoint(const std::string& dir);

// InputError("--resume", ...) naming the first entry of `identity` whose
// value differs from the checkpoint's (or that the checkpoint lacks).
void check_same_run(const Checkpoint& checkpoint, const nlohmann::json& identity);

}  // namespace trainsim
