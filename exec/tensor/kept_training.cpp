// KeptTraining (kept_training.hpp): the handles a device leaves in the
// host's gradients and weights, and the store calls behind them.
#include "exec/tensor/kept_training.hpp"

#include <algorithm>
#include <string>

#include "model/error.hpp"

namespace trainsim {

std::shared_ptr<KeptTraining::Kept> KeptTraining::kept_of(const std::shared_ptr<void>& handle) const {
  std::shared_ptr<Kept> k = std::static_pointer_cast<Kept>(handle);
  TRAINSIM_CHECK(k->owner == this, "a gradient or weight another device keeps");
  TRAINSIM_CHECK(!k->taken, "a copy of a gradient whose kept part another copy brought to the host");
  return k;
}

KeptTraining::Targets::Targets(KeptTraining& kept, Gradients& grads, int64_t first, int64_t last)
    : into(grads.size()), grads_(grads), first_(first), last_(last) {
  for (int64_t i = first; i <= last; ++i) {
    for (ParamGrad& grad : grads.at(static_cast<size_t>(i))) {
      ParamGrad& target = into[static_cast<size_t>(i)].emplace_back();
      if (grad.sparse) {
        target = std::move(grad);
        continue;
      }
      if (grad.kept == nullptr) grad.kept = std::make_shared<Kept>(Kept{&kept, kept.store_->zeros(grad.dense.size())});
      target.dense.shape = grad.dense.shape;
      target.dense.resident = kept.kept_of(grad.kept)->values;
    }
  }
}

KeptTraining::Targets::~Targets() {
  for (int64_t i = first_; i <= last_; ++i) {
    LayerGrads& layer = grads_[static_cast<size_t>(i)];
    for (size_t p = 0; p < layer.size(); ++p) {
      if (layer[p].sparse) layer[p] = std::move(into[static_cast<size_t>(i)][p]);  // a move keeps `sparse`
    }
  }
}

void KeptTraining::gradients_to_host(Gradients& grads, int64_t first, int64_t last) {
  std::vector<std::shared_ptr<Kept>> taken;
  std::vector<KeptValues*> sums;
  std::vector<std::span<float>> into;
  for (int64_t l = first; l <= last; ++l) {
    for (ParamGrad& g : grads.at(static_cast<size_t>(l))) {
      if (g.kept == nullptr) continue;
      std::shared_ptr<Kept> k = kept_of(g.kept);
      k->taken = true;
      sums.push_back(k->values.get());
      into.emplace_back(g.dense.data);
      taken.push_back(std::move(k));
      g.kept.reset();
    }
  }
  if (!sums.empty()) store_->to_host(sums, into, /*add=*/true);
}

bool KeptTraining::step(const Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last) {
  TRAINSIM_CHECK(
      weights.size() == grads.size() && first >= 0 && first <= last && last < static_cast<int64_t>(weights.size()),
      "a layer range of the weights and gradients");
  for (int64_t l = first; l <= last; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) return false;
    }
  }
  const SgdOptions& options = sgd.options();
  const bool momentum = options.momentum != 0;
  // Per parameter its kept weights, gradient and velocity; those the device
  // does not hold yet taken up from the host's values together.
  struct Stepped {
    Tensor* weights;
    std::shared_ptr<Kept> kept_weights;
    std::shared_ptr<KeptValues> grad;
    std::shared_ptr<KeptValues>* velocity = nullptr;  // velocity_'s entry
  };
  std::vector<Stepped> stepped;
  std::vector<std::span<const float>> uploads;
  std::vector<std::shared_ptr<KeptValues>*> uploaded;  // where each upload goes
  size_t count = 0;
  for (int64_t l = first; l <= last; ++l) count += weights[static_cast<size_t>(l)].size();
  stepped.reserve(count);  // `uploaded` points into it
  std::lock_guard lock(mu_);
  for (int64_t l = first; l <= last; ++l) {
    LayerParams& params = weights[static_cast<size_t>(l)];
    LayerGrads& layer_grads = grads[static_cast<size_t>(l)];
    TRAINSIM_CHECK(params.size() == layer_grads.size(), "layer " + std::to_string(l) + ": a gradient per parameter");
    for (size_t p = 0; p < params.size(); ++p) {
      Tensor& w = params[p];
      ParamGrad& g = layer_grads[p];
      TRAINSIM_CHECK(element_count(w.shape) == g.dense.size(), "a gradient of another size than its parameter");
      Stepped& s = stepped.emplace_back(Stepped{&w, nullptr, nullptr});
      if (w.resident != nullptr) {
        s.kept_weights = kept_of(w.resident);
      } else {
        s.kept_weights = std::make_shared<Kept>(Kept{this, nullptr});
        uploads.emplace_back(w.data);
        uploaded.push_back(&s.kept_weights->values);
      }
      // The gradient is its host values plus the sum kept of it; those are
      // zeros but where the host wrote into the set before a backward added
      // to it again, which the scan finds (one read of the gradient, less
      // than the host's step it replaces).
      if (g.kept != nullptr && std::any_of(g.dense.data.begin(), g.dense.data.end(), [](float v) { return v != 0; })) {
        gradients_to_host(grads, l, l);
      }
      if (g.kept != nullptr) {
        s.grad = kept_of(g.kept)->values;
      } else {
        uploads.emplace_back(g.dense.data);
        uploaded.push_back(&s.grad);
      }
      if (!momentum) continue;
      s.velocity = &velocity_[{l, p}];
      if (*s.velocity != nullptr) continue;
      const Weights& host = sgd.velocity();  // as Sgd::step: the host's, else zeros
      if (static_cast<size_t>(l) < host.size() && host[static_cast<size_t>(l)].size() == params.size()) {
        uploads.emplace_back(host[static_cast<size_t>(l)][p].data);
        uploaded.push_back(s.velocity);
      } else {
        *s.velocity = store_->zeros(g.dense.size());
      }
    }
  }
  std::vector<std::shared_ptr<KeptValues>> made = store_->from_host_all(uploads);
  TRAINSIM_CHECK(made.size() == uploaded.size(), "a copy of each value taken up");
  for (size_t i = 0; i < made.size(); ++i) *uploaded[i] = std::move(made[i]);
  std::vector<DeviceStore::SgdArrays> arrays;
  arrays.reserve(stepped.size());
  for (const Stepped& s : stepped) {
    arrays.push_back({s.kept_weights->values.get(), s.grad.get(), s.velocity == nullptr ? nullptr : s.velocity->get()});
  }
  store_->sgd_step_all(arrays, options);
  for (Stepped& s : stepped) {
    s.weights->data.clear();  // its capacity kept for the way back
    s.weights->resident = std::move(s.kept_weights);
  }
  return true;
}

void KeptTraining::weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* sgd) {
  std::vector<std::shared_ptr<KeptValues>> held;
  std::vector<KeptValues*> kept;
  std::vector<std::span<float>> into;
  for (int64_t l = std::max<int64_t>(first, 0); l <= last && l < static_cast<int64_t>(weights.size()); ++l) {
    for (Tensor& t : weights[static_cast<size_t>(l)]) {
      if (t.resident == nullptr) continue;
      held.push_back(kept_of(t.resident)->values);
      kept.push_back(held.back().get());
      t.data.resize(static_cast<size_t>(element_count(t.shape)));
      into.emplace_back(t.data);
      t.resident.reset();
    }
  }
  Weights velocity;
  if (sgd != nullptr) {
    std::lock_guard lock(mu_);
    for (auto it = velocity_.begin(); it != velocity_.end();) {
      const auto [l, p] = it->first;
      if (l < first || l > last) {
        ++it;
        continue;
      }
      if (velocity.empty()) velocity = sgd->velocity();
      velocity.resize(weights.size());
      LayerParams& layer = velocity[static_cast<size_t>(l)];
      if (layer.size() != weights[static_cast<size_t>(l)].size()) {  // as Sgd::step makes them
        layer.clear();
        for (const Tensor& w : weights[static_cast<size_t>(l)]) layer.emplace_back(w.shape, 0.0f);
      }
      held.push_back(it->second);
      kept.push_back(it->second.get());
      into.emplace_back(layer[p].data);
      it = velocity_.erase(it);
    }
  }
  if (!kept.empty()) store_->to_host(kept, into, /*add=*/false);
  if (!velocity.empty()) sgd->set_velocity(std::move(velocity));
}

void KeptTraining::fold_statistics(RangeNetwork& network, int64_t layer, LayerParams& statistics) {
  TRAINSIM_CHECK(statistics.size() == 2, "a batch normalization's running mean and variance");
  std::shared_ptr<Kept> kept[2];
  for (size_t i = 0; i < 2; ++i) {
    Tensor& t = statistics[i];
    kept[i] =
        t.resident != nullptr ? kept_of(t.resident) : std::make_shared<Kept>(Kept{this, store_->from_host(t.data)});
  }
  network.fold_statistics(layer, *kept[0]->values, *kept[1]->values);
  for (size_t i = 0; i < 2; ++i) {
    statistics[i].data.clear();
    statistics[i].resident = std::move(kept[i]);
  }
}

Weights KeptTraining::copy_weights(const Weights& weights, std::span<const uint8_t> layers) const {
  Weights copy(weights.size());
  for (size_t l = 0; l < weights.size() && l < layers.size(); ++l) {
    if (layers[l] == 0) continue;
    for (const Tensor& t : weights[l]) {
      if (t.resident == nullptr) {
        copy[l].push_back(t);
        continue;
      }
      Tensor& kept = copy[l].emplace_back();
      kept.shape = t.shape;
      kept.resident = std::make_shared<Kept>(Kept{this, store_->copy(*kept_of(t.resident)->values)});
    }
  }
  return copy;
}

std::vector<KeptValues*> KeptTraining::kept_weights(const LayerParams& params) const {
  std::vector<KeptValues*> out;
  for (const Tensor& t : params) {
    if (t.resident != nullptr) out.push_back(kept_of(t.resident)->values.get());
  }
  TRAINSIM_CHECK(out.empty() || out.size() == params.size(), "a layer's weights partly on the device");
  return out;
}

}  // namespace trainsim
