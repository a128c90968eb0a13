// PipeDream weight stashing (Narayanan et al., SOSP 2019, §3.3): a stage keeps
// the weight version each in-flight mini-batch's forward used, so that the
// mini-batch's backward runs on the same weights. Versions are stored once
// and shared by the mini-batches that used them; a version is dropped when
// the last of them finished its backward. Vertical sync is not provided.
#pragma once

#include <cstdint>
#include <map>

#include "exec/tensor/tensor.hpp"

namespace trainsim {

// The stash of one stage, layers [first, last] of the model. Stored weights
// keep the model's layer indices (layers outside the range are empty), so a
// stored version can be passed to forward_range / backward_range as is.
class WeightStash {
 public:
  WeightStash(int64_t first, int64_t last);

  // Records that mini-batch `batch` runs its forward on `weights`, version
  // `version` (the count of updates the stage applied so far). Copies the
  // range unless that version is already held. A batch is pushed once.
  void push(int64_t batch, int64_t version, const Weights& weights);

  // The weights the forward of `batch` used (for its backward), and their version.
  const Weights& weights_for(int64_t batch) const;
  int64_t version_of(int64_t batch) const;

  // Called when the backward of `batch` is done: forgets the batch and drops
  // its version if no other in-flight batch uses it.
  void release(int64_t batch);

  // Distinct weight versions held, and mini-batches between forward and backward.
  int64_t versions_held() const { return static_cast<int64_t>(versions_.size()); }
  int64_t batches_in_flight() const { return static_cast<int64_t>(version_of_batch_.size()); }

 private:
  struct StoredVersion {
    Weights weights;
    int64_t users = 0;  // in-flight batches whose forward used it
  };

  int64_t first_;
  int64_t last_;
  std::map<int64_t, StoredVersion> versions_;   // by version number
  std::map<int64_t, int64_t> version_of_batch_; // batch -> version
};

}  // namespace trainsim
