// PipeDream weight stashing: versions stored once, reference-counted by the
// in-flight mini-batches that used them.
#include "exec/optim/weight_stash.hpp"

#include <string>

#include "model/error.hpp"

namespace trainsim {

WeightStash::WeightStash(int64_t first, int64_t last) : first_(first), last_(last) {
  TRAINSIM_CHECK(first >= 0 && first <= last, "bad stash layer range");
}

void WeightStash::push(int64_t batch, int64_t version, const Weights& weights) {
  TRAINSIM_CHECK(last_ < static_cast<int64_t>(weights.size()), "stash range beyond the model's layers");
  auto [batch_it, inserted] = version_of_batch_.try_emplace(batch, version);
  TRAINSIM_CHECK(inserted, "mini-batch " + std::to_string(batch) + " stashed twice");
  StoredVersion& stored = versions_[version];
  if (stored.users == 0) {
    stored.weights.assign(weights.size(), LayerParams{});
    for (int64_t layer = first_; layer <= last_; ++layer) stored.weights[layer] = weights[layer];
  }
  ++stored.users;
}

const Weights& WeightStash::weights_for(int64_t batch) const {
  return versions_.at(version_of(batch)).weights;
}

int64_t WeightStash::version_of(int64_t batch) const {
  const auto it = version_of_batch_.find(batch);
  TRAINSIM_CHECK(it != version_of_batch_.end(), "mini-batch " + std::to_string(batch) + " is not in flight");
  return it->second;
}

void WeightStash::release(int64_t batch) {
  const int64_t version = version_of(batch);
  version_of_batch_.erase(batch);
  auto it = versions_.find(version);
  if (--it->second.users == 0) versions_.erase(it);
}

}  // namespace trainsim
