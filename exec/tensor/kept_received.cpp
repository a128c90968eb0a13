// KeptTraining's part of gradients that arrive from the host on a device
// that keeps the gradient sums (kept_training.hpp): a parameter server's
// received gradients added into its sums where they are and their mean
// taken there, in the host's order (add_flat_gradients per sender, then
// scale_gradients), so that the server's own gradient never comes to the
// host and goes back up; and a host's AllReduce or accumulation taken up
// as the sums when it comes back, so that the update finds them there.
#include <algorithm>
#include <string>
#include <vector>

#include "exec/tensor/kept_training.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

// The dense gradients' values in flatten_gradients' layout over [first,
// last]: as many as `flat` holds, else an error.
void check_flat_size(std::span<const float> flat, const Gradients& grads, int64_t first, int64_t last) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()),
                 "a layer range of the gradients");
  size_t floats = 0;  // a kept gradient's host values are of its size
  for (int64_t l = first; l <= last; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) floats += g.sparse ? 0 : g.dense.data.size();
  }
  TRAINSIM_CHECK(floats == flat.size(), "a flat gradient of " + std::to_string(flat.size()) + " values for layers of " +
                                            std::to_string(floats));
}

}  // namespace

void KeptTraining::bring_together(Gradients& grads, int64_t first, int64_t last) {
  for (int64_t l = first; l <= last; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (!g.sparse && g.kept != nullptr && any_nonzero(g.dense.data)) {
        gradients_to_host(grads, l, l);  // the layer's kept sums, this one's among them
        break;
      }
    }
  }
}

void KeptTraining::add_flat(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last) {
  check_flat_size(flat, grads, first, last);
  bring_together(grads, first, last);
  std::vector<std::span<const float>> parts;
  std::vector<KeptValues*> sums;
  size_t at = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) continue;  // add_flat_gradients' layout: the dense ones
      const std::span<const float> part = flat.subspan(at, g.dense.data.size());
      at += part.size();
      if (g.kept != nullptr) {
        parts.push_back(part);
        sums.push_back(kept_of(g.kept)->values.get());
        continue;
      }
      for (size_t i = 0; i < part.size(); ++i) g.dense.data[i] += part[i];
    }
  }
  const std::vector<std::shared_ptr<KeptValues>> up = store_->from_host_all(parts);
  TRAINSIM_CHECK(up.size() == sums.size(), "a copy of each part taken up");
  for (size_t i = 0; i < up.size(); ++i) store_->add_scaled(*sums[i], up[i].get(), 1.0f);
}

bool KeptTraining::take_flat(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last,
                             bool dense_only) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()),
                 "a layer range of the gradients");
  for (int64_t l = first; l <= last && !dense_only; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) return false;  // its part of `flat` densified: the host's
    }
  }
  check_flat_size(flat, grads, first, last);
  std::vector<std::span<const float>> parts;
  std::vector<ParamGrad*> taken;
  size_t at = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) continue;  // dense_only: left as they are
      parts.push_back(flat.subspan(at, g.dense.data.size()));
      at += g.dense.data.size();
      taken.push_back(&g);
    }
  }
  std::vector<std::shared_ptr<KeptValues>> made = store_->from_host_all(parts);
  TRAINSIM_CHECK(made.size() == taken.size(), "a copy of each gradient taken up");
  for (size_t i = 0; i < made.size(); ++i) {
    taken[i]->kept = std::make_shared<Kept>(Kept{this, std::move(made[i])});
    std::fill(taken[i]->dense.data.begin(), taken[i]->dense.data.end(), 0.0f);
  }
  return true;
}

void KeptTraining::scale(Gradients& grads, float factor, int64_t first, int64_t last) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()),
                 "a layer range of the gradients");
  bring_together(grads, first, last);
  for (int64_t l = first; l <= last; ++l) {
    for (ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (!g.sparse && g.kept != nullptr) {
        store_->add_scaled(*kept_of(g.kept)->values, nullptr, factor);
        continue;
      }
      for (float& value : g.sparse ? g.row_values.data : g.dense.data) value *= factor;
    }
  }
}

}  // namespace trainsim
