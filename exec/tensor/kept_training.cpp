// KeptTraining (kept_training.hpp): the handles a device leaves in the
// host's gradients and weights, and the store calls behind them.
#include "exec/tensor/kept_training.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>

#include "model/error.hpp"

namespace trainsim {

// Read in blocks the compiler vectorizes: std::any_of's exit at each value
// keeps it to one value at a time, twice as slow on a step's megabytes of
// zeros.
bool any_nonzero(std::span<const float> values) {
  constexpr size_t kBlock = 1024;
  for (size_t i = 0; i < values.size(); i += kBlock) {
    const size_t end = std::min(values.size(), i + kBlock);
    uint32_t bits = 0;
    for (size_t j = i; j < end; ++j) bits |= std::bit_cast<uint32_t>(values[j]) & 0x7fffffffu;
    if (bits != 0) return true;
  }
  return false;
}

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

bool KeptTraining::all_reduce(Gradients& grads, int64_t first, int64_t last, bool dense_only, const SumKept& sum) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()),
                 "a layer range of the gradients");
  for (int64_t l = first; l <= last && !dense_only; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) return false;
    }
  }
  bring_together(grads, first, last);  // as step sums them
  std::vector<ParamGrad*> dense;
  for (int64_t l = first; l <= last; ++l) {
    for (ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (!g.sparse) dense.push_back(&g);
    }
  }
  std::vector<std::span<const float>> uploads;
  std::vector<ParamGrad*> uploaded;
  for (ParamGrad* g : dense) {
    if (g->kept != nullptr) continue;
    uploads.emplace_back(g->dense.data);
    uploaded.push_back(g);
  }
  std::vector<std::shared_ptr<KeptValues>> made = store_->from_host_all(uploads);
  TRAINSIM_CHECK(made.size() == uploaded.size(), "a copy of each gradient taken up");
  for (size_t i = 0; i < made.size(); ++i) {
    uploaded[i]->kept = std::make_shared<Kept>(Kept{this, std::move(made[i])});
    std::fill(uploaded[i]->dense.data.begin(), uploaded[i]->dense.data.end(), 0.0f);
  }
  std::vector<KeptValues*> arrays;
  int64_t floats = 0;
  for (ParamGrad* g : dense) {
    arrays.push_back(kept_of(g->kept)->values.get());
    floats += g->dense.size();
  }
  sum(arrays, floats);
  return true;
}

bool KeptTraining::step(const Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last,
                        const SpecTrain* spectrain) {
  TRAINSIM_CHECK(
      weights.size() == grads.size() && first >= 0 && first <= last && last < static_cast<int64_t>(weights.size()),
      "a layer range of the weights and gradients");
  for (int64_t l = first; l <= last && spectrain != nullptr; ++l) {
    for (const ParamGrad& g : grads[static_cast<size_t>(l)]) {
      if (g.sparse) return false;  // SpecTrain observes sparse rows on the host
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
    std::shared_ptr<KeptValues>* smoothed = nullptr;  // smoothed_'s (SpecTrain)
  };
  std::vector<Stepped> stepped;
  // A sparse table's: its kept weights and velocity, and the rows its
  // step moves (distinct, rows_to_step's: the indices, each int64 in two
  // floats' bytes, and their values), taken up with the rest.
  struct SteppedRows {
    Tensor* weights = nullptr;
    std::shared_ptr<Kept> kept_weights;
    std::shared_ptr<KeptValues>* velocity = nullptr;
    int64_t count = 0, width = 0;
    std::vector<float> indices, values;
    std::shared_ptr<KeptValues> kept_indices, kept_values;
  };
  std::vector<SteppedRows> stepped_rows;
  std::vector<std::span<const float>> uploads;
  std::vector<std::shared_ptr<KeptValues>*> uploaded;  // where each upload goes
  size_t count = 0;
  for (int64_t l = first; l <= last; ++l) count += weights[static_cast<size_t>(l)].size();
  stepped.reserve(count);  // `uploaded` points into it
  stepped_rows.reserve(count);
  Weights host_smoothed;   // SpecTrain's v on the host, read once where the device holds none yet
  // A copy of `host`'s parameter (l, p) into *to, taken up with the others;
  // zeros where the host holds none (as Sgd::step and SpecTrain start them).
  const auto take_up = [&](const Weights& host, int64_t l, size_t p, size_t params, int64_t floats,
                           std::shared_ptr<KeptValues>* to) {
    if (static_cast<size_t>(l) < host.size() && host[static_cast<size_t>(l)].size() == params) {
      uploads.emplace_back(host[static_cast<size_t>(l)][p].data);
      uploaded.push_back(to);
    } else {
      *to = store_->zeros(floats);
    }
  };
  std::lock_guard lock(mu_);
  // A step refused or failed midway (a sparse gradient checked, the GPU
  // out of memory) leaves no slot it made in velocity_ or smoothed_ empty:
  // the host's values stay the ones to take up.
  struct DropEmptySlots {
    KeptTraining& k;
    int uncaught = std::uncaught_exceptions();
    explicit DropEmptySlots(KeptTraining& owner) : k(owner) {}
    DropEmptySlots(const DropEmptySlots&) = delete;
    DropEmptySlots& operator=(const DropEmptySlots&) = delete;
    ~DropEmptySlots() {
      if (std::uncaught_exceptions() == uncaught) return;
      for (auto* slots : {&k.velocity_, &k.smoothed_})
        std::erase_if(*slots, [](const auto& e) { return e.second == nullptr; });
    }
  } drop_empty(*this);
  for (int64_t l = first; l <= last; ++l) {
    LayerParams& params = weights[static_cast<size_t>(l)];
    LayerGrads& layer_grads = grads[static_cast<size_t>(l)];
    TRAINSIM_CHECK(params.size() == layer_grads.size(), "layer " + std::to_string(l) + ": a gradient per parameter");
    for (size_t p = 0; p < params.size(); ++p) {
      Tensor& w = params[p];
      ParamGrad& g = layer_grads[p];
      // The kept weights of w, taken up from the host's where it has none.
      const auto kept_weights = [&] {
        if (w.resident != nullptr) return kept_of(w.resident);
        auto k = std::make_shared<Kept>(Kept{this, nullptr});
        uploads.emplace_back(w.data);
        uploaded.push_back(&k->values);
        return k;
      };
      if (g.sparse) {  // a lazy step of the rows it lists: nothing taken up where it lists none
        if (g.rows.empty()) continue;
        SteppedRows& s = stepped_rows.emplace_back();
        s.weights = &w;
        // Checked before anything is stepped; its shape's width: a resident tensor holds no data.
        s.width = w.rows() == 0 ? 0 : element_count(w.shape) / w.rows();
        const RowsToStep rows = rows_to_step(g, w.rows(), s.width, merge_);
        s.count = static_cast<int64_t>(rows.rows.size());
        TRAINSIM_CHECK(s.width > 0, "layer " + std::to_string(l) + ": a sparse table of rows of no values");
        // Taken up into arrays of a power of two rows (the rest zeros), so
        // that the store's pool lends them again as the count moves.
        const auto capacity = static_cast<size_t>(std::bit_ceil(static_cast<uint64_t>(s.count)));
        s.indices.assign(2 * capacity, 0.0f);
        static_assert(sizeof(int64_t) == 2 * sizeof(float));
        std::memcpy(s.indices.data(), rows.rows.data(), rows.rows.size_bytes());
        s.values.assign(capacity * static_cast<size_t>(s.width), 0.0f);
        std::copy(rows.values.begin(), rows.values.end(), s.values.begin());
        s.kept_weights = kept_weights();
        for (auto [from, to] : {std::pair{&s.indices, &s.kept_indices}, std::pair{&s.values, &s.kept_values}}) {
          uploads.emplace_back(*from);
          uploaded.push_back(to);
        }
        if (!momentum) continue;
        s.velocity = &velocity_[{l, p}];
        if (*s.velocity == nullptr) take_up(sgd.velocity(), l, p, params.size(), element_count(w.shape), s.velocity);
        continue;
      }
      TRAINSIM_CHECK(element_count(w.shape) == g.dense.size(), "a gradient of another size than its parameter");
      Stepped& s = stepped.emplace_back(Stepped{&w, kept_weights(), nullptr});
      // The gradient is its host values plus the sum kept of it; those are
      // zeros but where the host wrote into the set before a backward added
      // to it again, which the scan finds (one read of the gradient, less
      // than the host's step it replaces).
      if (g.kept != nullptr && any_nonzero(g.dense.data)) {
        gradients_to_host(grads, l, l);
      }
      if (g.kept != nullptr) {
        s.grad = kept_of(g.kept)->values;
      } else {
        uploads.emplace_back(g.dense.data);
        uploaded.push_back(&s.grad);
      }
      if (spectrain != nullptr) {
        s.smoothed = &smoothed_[{l, p}];
        if (*s.smoothed == nullptr) {
          if (host_smoothed.empty()) host_smoothed = spectrain->smoothed_gradient();
          take_up(host_smoothed, l, p, params.size(), g.dense.size(), s.smoothed);
        }
      }
      if (!momentum) continue;
      s.velocity = &velocity_[{l, p}];
      if (*s.velocity == nullptr) take_up(sgd.velocity(), l, p, params.size(), g.dense.size(), s.velocity);
    }
  }
  std::vector<std::shared_ptr<KeptValues>> made = store_->from_host_all(uploads);
  TRAINSIM_CHECK(made.size() == uploaded.size(), "a copy of each value taken up");
  for (size_t i = 0; i < made.size(); ++i) *uploaded[i] = std::move(made[i]);
  if (spectrain != nullptr) {  // eq. 1, as SpecTrain::observe
    const auto gamma = static_cast<float>(spectrain->options().gamma);
    const auto rest = static_cast<float>(1.0 - spectrain->options().gamma);
    for (const Stepped& s : stepped) store_->smooth(**s.smoothed, *s.grad, gamma, rest);
  }
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
  // Each table by the rows its gradient lists, made distinct on the host
  // as Sgd's lazy step makes them: only they went up.
  for (SteppedRows& s : stepped_rows) {
    store_->sgd_step_rows(*s.kept_weights->values, s.velocity == nullptr ? nullptr : s.velocity->get(), *s.kept_indices,
                          *s.kept_values, s.count, s.width, options);
    s.weights->data.clear();
    s.weights->resident = std::move(s.kept_weights);
  }
  return true;
}

void KeptTraining::take_back(std::map<Param, std::shared_ptr<KeptValues>>& kept, int64_t first, int64_t last,
                             const Weights& weights, const std::function<Weights()>& host, Weights& into,
                             std::vector<std::shared_ptr<KeptValues>>& held, std::vector<KeptValues*>& arrays,
                             std::vector<std::span<float>>& spans) {
  bool started = false;
  for (auto it = kept.begin(); it != kept.end();) {
    const auto [l, p] = it->first;
    if (l < first || l > last) {
      ++it;
      continue;
    }
    if (!started) into = host();
    started = true;
    into.resize(weights.size());
    LayerParams& layer = into[static_cast<size_t>(l)];
    if (layer.size() != weights[static_cast<size_t>(l)].size()) {  // as Sgd::step and SpecTrain make them
      layer.clear();
      for (const Tensor& w : weights[static_cast<size_t>(l)]) layer.emplace_back(w.shape, 0.0f);
    }
    held.push_back(it->second);
    arrays.push_back(it->second.get());
    spans.emplace_back(layer[p].data);
    it = kept.erase(it);
  }
}

void KeptTraining::weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* sgd, SpecTrain* spectrain) {
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
  Weights velocity, smoothed;
  {
    std::lock_guard lock(mu_);
    if (sgd != nullptr) {
      take_back(
          velocity_, first, last, weights, [&] { return sgd->velocity(); }, velocity, held, kept, into);
    }
    if (spectrain != nullptr) {
      take_back(
          smoothed_, first, last, weights, [&] { return spectrain->smoothed_gradient(); }, smoothed, held, kept, into);
    }
  }
  if (!kept.empty()) store_->to_host(kept, into, /*add=*/false);
  if (!velocity.empty()) sgd->set_velocity(std::move(velocity));
  if (!smoothed.empty()) spectrain->set_smoothed_gradient(std::move(smoothed));
}

bool KeptTraining::predict(const SpecTrain& spectrain, const Weights& weights, int64_t version_difference,
                           int64_t first, int64_t last, Weights& out, const SpecTrain::Only& only) const {
  TRAINSIM_CHECK(version_difference >= 0 && first >= 0 && first <= last && last < static_cast<int64_t>(weights.size()),
                 "a prediction of a layer range of the weights");
  if (only.sparse_layer >= first && only.sparse_layer <= last) return false;
  const auto skipped = [&](int64_t l) { return l < static_cast<int64_t>(only.skip.size()) && only.skip[l] != 0; };
  for (int64_t l = first; l <= last; ++l) {
    if (!skipped(l) && kept_weights(weights[static_cast<size_t>(l)]).size() != weights[static_cast<size_t>(l)].size()) {
      return false;
    }
  }
  // As SpecTrain::predict_into: W − s·η·v, or W itself before v moves it.
  const auto step = static_cast<float>(static_cast<double>(version_difference) * spectrain.options().learning_rate);
  if (out.size() != weights.size()) out.resize(weights.size());
  std::lock_guard lock(mu_);
  for (int64_t l = first; l <= last; ++l) {
    if (skipped(l)) continue;
    const LayerParams& w = weights[static_cast<size_t>(l)];
    LayerParams& predicted = out[static_cast<size_t>(l)];
    predicted.assign(w.size(), Tensor());
    for (size_t p = 0; p < w.size(); ++p) {
      const auto v = smoothed_.find({l, p});
      predicted[p].shape = w[p].shape;
      if (version_difference == 0 || v == smoothed_.end()) {
        predicted[p].resident = w[p].resident;  // its values, read only
      } else {
        predicted[p].resident =
            std::make_shared<Kept>(Kept{this, store_->predict(*kept_of(w[p].resident)->values, *v->second, step)});
      }
    }
  }
  return true;
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
