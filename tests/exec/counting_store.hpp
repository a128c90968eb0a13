// The counts of what crosses between a stand-in "device" and the host
// (BufferCounts), and the stand-in of a GPU's DeviceStore that keeps its
// values in host tensors and steps them with exec/optim's own arithmetic
// (CountingStore), for the lending device's tests (buffered_cpu_network.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "exec/tensor/memory_budget.hpp"
#include "exec/tensor/range_network.hpp"
#include "model/error.hpp"

namespace trainsim::buffered {

struct BufferCounts {
  std::mutex mu;
  int64_t networks = 0;         // made
  int64_t uploads = 0;          // range inputs given from the host
  int64_t in_place = 0;         // range inputs read where the range before left them
  int64_t downloads = 0;        // cut values or gradients brought back
  int64_t zeros = 0;            // arrays kept on the device made zero (gradient sums, fresh velocities)
  int64_t sums_back = 0;        // gradient sums brought to the host
  int64_t waits = 0;            // the store's waits to bring arrays back
  int64_t from_host = 0;        // arrays kept on the device made from the host's values
  int64_t steps = 0;            // parameters stepped on the device
  int64_t row_steps = 0;        // sparse tables' rows stepped on the device (a lazy step each)
  int64_t weights_back = 0;     // weights or velocities brought to the host
  int64_t host_loads = 0;       // layers' weights a network loaded from the host
  int64_t host_reloads = 0;     // of them, into a network that had loaded the layer before
  int64_t kept_loads = 0;       // from weights kept on the device
  int64_t statistics_back = 0;  // batch statistics of a range brought to the host
  int64_t folds = 0;            // batch norms' running statistics folded on the device
  int64_t copies = 0;           // kept arrays copied on the device (stashed weights)
  int64_t smooths = 0;          // SpecTrain's smoothed gradients updated on the device
  int64_t sums_added = 0;       // gradients added into (or means taken of) kept sums on the device
  int64_t predictions = 0;      // parameters SpecTrain predicted on the device
  int64_t losses = 0;           // losses computed, each returned unknown
  int64_t exports = 0;          // boundaries copied out for a network of another device
  int64_t imports = 0;          // range inputs copied from such a boundary
  int64_t peer_copies = 0;      // arrays of another store (a peer memory's) copied into a store
  int64_t input_waits = 0;      // range inputs in a store's array waited for (RangeNetwork::wait_for)
  // Per network made, the layers it holds (HeldLayers::computes).
  std::vector<std::vector<uint8_t>> held;
  // (previous, next) of each RangeNetwork::queue_after, in call order.
  std::vector<std::pair<const RangeNetwork*, const RangeNetwork*>> queued_after;
  // The networks made and not yet let go (queue_after names one of them).
  std::set<const RangeNetwork*> alive;
  // Per loss read, in the order of the reads: how many losses had been
  // computed by then.
  std::vector<int64_t> computed_when_read;

  // The counts after a run, and the plan's ops they compare with.
  struct Totals {
    int64_t waits = 0, host_reloads = 0, kept_loads = 0, steps = 0, backwards = 0, updates = 0, all_reduces = 0,
            workers = 0, statistics_back = 0, folds = 0, copies = 0, smooths = 0, predictions = 0, downloads = 0,
            exports = 0, row_steps = 0;
    int64_t most_layers_held = 0;  // by one network
    int64_t layers = 0;            // of the model
    int64_t sums_added = 0, sums_back = 0;
  };
  void add(int64_t BufferCounts::*field) {
    std::lock_guard lock(mu);
    ++(this->*field);
  }
};

// Values kept "on the device": a gradient sum as backwards add into it,
// weights and a velocity as steps leave them.
struct CpuKept final : KeptValues {
  Tensor values;
  int64_t memory = -1;  // that of the store that made it
  // The budget its values charged (the store's), as a GPU array's.
  std::shared_ptr<MemoryBudget> budget;
  int64_t bytes = 0;
  CpuKept() = default;
  CpuKept(const CpuKept&) = delete;
  CpuKept& operator=(const CpuKept&) = delete;
  ~CpuKept() override {
    if (budget != nullptr) budget->release(bytes);
  }
};

inline Tensor& kept_values(KeptValues& k) { return dynamic_cast<CpuKept&>(k).values; }

class CountingStore final : public DeviceStore {
 public:
  // `memory`: the memory its arrays are in (Device::shared_memory); each
  // array charges `budget` (where given) with its values' bytes.
  explicit CountingStore(BufferCounts& counts, int64_t memory = -1, std::shared_ptr<MemoryBudget> budget = nullptr)
      : counts_(counts), memory_(memory), budget_(std::move(budget)) {}
  int64_t memory() const { return memory_; }
  void when_full(std::function<void()> make_room) override { make_room_ = std::move(make_room); }
  std::shared_ptr<KeptValues> zeros(int64_t floats) override {
    counts_.add(&BufferCounts::zeros);
    return made(floats);
  }
  std::shared_ptr<KeptValues> from_host(std::span<const float> values) override {
    counts_.add(&BufferCounts::from_host);
    auto k = made(static_cast<int64_t>(values.size()));
    std::copy(values.begin(), values.end(), k->values.data.begin());
    return k;
  }
  void to_host(std::span<KeptValues* const> kept, std::span<const std::span<float>> into, bool add) override {
    counts_.add(&BufferCounts::waits);
    for (size_t i = 0; i < kept.size(); ++i) {
      const Tensor& values = kept_values(*kept[i]);
      TRAINSIM_CHECK(values.data.size() == into[i].size(), "a kept array of another size");
      for (size_t j = 0; j < into[i].size(); ++j) into[i][j] = (add ? into[i][j] : 0.0f) + values.data[j];
      counts_.add(add ? &BufferCounts::sums_back : &BufferCounts::weights_back);
    }
  }
  // Of another memory's array: a peer memory's, copied in.
  std::shared_ptr<KeptValues> copy(KeptValues& values) override {
    const bool peer = dynamic_cast<CpuKept&>(values).memory != memory_;
    counts_.add(peer ? &BufferCounts::peer_copies : &BufferCounts::copies);
    auto k = made(kept_values(values).size());
    k->values = kept_values(values);
    return k;
  }
  // SpecTrain::observe's and predict_into's arithmetic.
  void smooth(KeptValues& smoothed, KeptValues& grad, float gamma, float rest) override {
    counts_.add(&BufferCounts::smooths);
    std::vector<float>& v = kept_values(smoothed).data;
    const std::vector<float>& g = kept_values(grad).data;
    TRAINSIM_CHECK(v.size() == g.size(), "a smoothed gradient of another size than its gradient");
    for (size_t i = 0; i < v.size(); ++i) v[i] = gamma * v[i] + rest * g[i];
  }
  // add_flat_gradients' and scale_gradients' arithmetic.
  void add_scaled(KeptValues& sum, KeptValues* values, float scale) override {
    counts_.add(&BufferCounts::sums_added);
    std::vector<float>& s = kept_values(sum).data;
    if (values != nullptr) {
      const std::vector<float>& v = kept_values(*values).data;
      TRAINSIM_CHECK(v.size() == s.size(), "a gradient added into a sum of another size");
      for (size_t i = 0; i < s.size(); ++i) s[i] += v[i];
    }
    if (scale != 1.0f) {
      for (float& x : s) x *= scale;
    }
  }
  std::shared_ptr<KeptValues> predict(KeptValues& weights, KeptValues& smoothed, float step) override {
    counts_.add(&BufferCounts::predictions);
    const std::vector<float>& w = kept_values(weights).data;
    const std::vector<float>& v = kept_values(smoothed).data;
    TRAINSIM_CHECK(w.size() == v.size(), "a smoothed gradient of another size than its weights");
    auto k = made(static_cast<int64_t>(w.size()));
    for (size_t i = 0; i < w.size(); ++i) k->values.data[i] = w[i] - step * v[i];
    return k;
  }
  // Sgd::step itself, on the kept arrays.
  void sgd_step(KeptValues& weights, KeptValues& grad, KeptValues* velocity, const SgdOptions& options) override {
    counts_.add(&BufferCounts::steps);
    Weights w(1);
    w[0].push_back(std::move(kept_values(weights)));
    Gradients g(1);
    g[0].emplace_back().dense = std::move(kept_values(grad));
    Sgd sgd(options);
    if (velocity != nullptr) sgd.set_velocity(Weights{{kept_values(*velocity)}});
    sgd.step(w, g, 0, 0);
    kept_values(weights) = std::move(w[0][0]);
    kept_values(grad) = std::move(g[0][0].dense);
    if (velocity != nullptr) kept_values(*velocity) = sgd.velocity()[0][0];
  }
  // Sgd's lazy step itself, on the kept table shaped {rows, width}.
  void sgd_step_rows(KeptValues& weights, KeptValues* velocity, KeptValues& rows, KeptValues& values, int64_t count,
                     int64_t width, const SgdOptions& options) override {
    if (count == 0) return;  // as the GPU's store
    // Checked as the GPU's store checks them, before anything moves.
    const std::vector<float>& indices = kept_values(rows).data;
    const std::vector<float>& sums = kept_values(values).data;
    const size_t table = kept_values(weights).data.size();
    TRAINSIM_CHECK(width > 0 && count > 0 && table % static_cast<size_t>(width) == 0 &&
                       indices.size() >= 2 * static_cast<size_t>(count) &&
                       sums.size() >= static_cast<size_t>(count * width) &&
                       (velocity == nullptr || kept_values(*velocity).data.size() == table),
                   "a lazy step of a table, its rows and their values, and its velocity of different sizes");
    TRAINSIM_CHECK(velocity != nullptr || options.momentum == 0, "a momentum step without its velocity");
    counts_.add(&BufferCounts::row_steps);
    const auto as_table = [width](Tensor& flat) {
      Tensor t;
      t.shape = {static_cast<int64_t>(flat.data.size()) / width, width};
      t.data = std::move(flat.data);
      return t;
    };
    Weights w(1);
    w[0].push_back(as_table(kept_values(weights)));
    Gradients g(1);
    ParamGrad& grad = g[0].emplace_back();
    grad.sparse = true;
    // As the GPU's store: its first `count` rows read, a momentum step only with its velocity.
    grad.rows.resize(static_cast<size_t>(count));
    std::memcpy(grad.rows.data(), indices.data(), grad.rows.size() * sizeof(int64_t));
    grad.row_values.shape = {count, width};
    grad.row_values.data.assign(sums.begin(), sums.begin() + count * width);
    Sgd sgd(options);
    if (velocity != nullptr) {
      Weights v(1);
      v[0].push_back(as_table(kept_values(*velocity)));
      sgd.set_velocity(std::move(v));
    }
    sgd.step(w, g, 0, 0);
    kept_values(weights).data = std::move(w[0][0].data);
    if (velocity != nullptr) kept_values(*velocity).data = sgd.velocity()[0][0].data;
  }

 private:
  // An array of `floats` zeros, charged to the budget (nothing made past it
  // once what when_full frees is freed, as a GPU store's).
  std::shared_ptr<CpuKept> made(int64_t floats) const {
    const auto bytes = static_cast<int64_t>(sizeof(float)) * floats;
    if (budget_ != nullptr) {
      try {
        budget_->charge(bytes);
      } catch (const MemoryBudgetExceeded&) {
        if (!make_room_) throw;
        make_room_();
        budget_->charge(bytes);
      }
    }
    auto k = std::make_shared<CpuKept>();
    k->memory = memory_;
    k->budget = budget_;
    k->bytes = budget_ != nullptr ? bytes : 0;
    k->values = Tensor({floats});
    return k;
  }
  BufferCounts& counts_;
  int64_t memory_;
  std::shared_ptr<MemoryBudget> budget_;
  std::function<void()> make_room_;
};

}  // namespace trainsim::buffered
