// A CPU stand-in for a GPU network under the lending device
// (exec/tensor/lending_device.hpp): its own copy of the weights, loaded per
// layer; per layer the cache of its last forward, which the backward reads
// (a later forward of the layer overwrites it); per cut the values and
// gradients its last ranges left there (those inside a range are not kept,
// so reading one in place fails); gradient sums kept in a store of its
// own. It counts what crosses between "device" and host, and
// expect_lending_trains_as_the_cpu runs a strategy on it beside the CPU
// device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/library_calls.hpp"
#include "exec/tensor/held_layers.hpp"
#include "exec/tensor/lending_device.hpp"
#include "model/error.hpp"
#include "tests/exec/counting_store.hpp"
#include "tests/exec/host_work_mark.hpp"
#include "tests/exec/plan_counts.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim::buffered {

using strategy_runs::RunSpec;
using strategy_runs::StrategyRun;

class BufferedCpuNetwork final : public RangeNetwork {
 public:
  // With `store`, its device's: a boundary exported into another memory's
  // store (a peer's) is refused, as a GPU's network reads only its own GPU's.
  // It holds what `held` says (every layer without it): any other layer or
  // cut its device asks of it is a TRAINSIM_CHECK.
  BufferedCpuNetwork(const Network& network, int64_t batch, BufferCounts& counts, const CountingStore* store = nullptr,
                     const HeldLayers* held = nullptr)
      : store_(store),
        network_(&network),
        held_(held != nullptr ? *held : held_layers(network, {})),
        batch_(batch),
        weights_(network.layers.size()),
        caches_(network.layers.size()),
        values_(network.layers.size() + 1),
        gradients_(network.layers.size() + 1),
        counts_(counts) {
    // What it holds charges the thread's ChargeTo, as a GPU network's arrays
    // do as it is made: its layers' weights and gradients, and its tensors'
    // values and gradients at its batch.
    budget_ = ChargeTo::current();
    if (budget_ != nullptr) {
      for (size_t l = 0; l < network.layers.size(); ++l) {
        if (held_.computes[l] == 0) continue;
        for (const std::vector<int64_t>& shape : network.layers[l]->param_shapes()) bytes_ += 8 * element_count(shape);
      }
      for (size_t t = 0; t < held_.tensors.size(); ++t) {
        if (held_.tensors[t] == 0) continue;
        bytes_ += 8 * batch * element_count(t == 0 ? network.input_shape : network.output_shapes[t - 1]);
      }
      budget_->charge(bytes_);
    }
    counts_.add(&BufferCounts::networks);
    std::lock_guard lock(counts_.mu);
    counts_.held.push_back(held_.computes);
    counts_.alive.insert(this);
  }
  ~BufferedCpuNetwork() override {
    if (budget_ != nullptr) budget_->release(bytes_);
    std::lock_guard lock(counts_.mu);
    counts_.alive.erase(this);
  }
  BufferedCpuNetwork(const BufferedCpuNetwork&) = delete;
  BufferedCpuNetwork& operator=(const BufferedCpuNetwork&) = delete;

  int64_t batch() const override { return batch_; }
  void load_weights(const Weights& weights, int64_t first, int64_t last) override {
    for (int64_t l = first; l <= last; ++l) {
      holds(l);
      weights_[static_cast<size_t>(l)] = weights[static_cast<size_t>(l)];
      counts_.add(&BufferCounts::host_loads);
      if (loaded_[static_cast<size_t>(l)]) counts_.add(&BufferCounts::host_reloads);
      loaded_[static_cast<size_t>(l)] = true;
    }
  }
  // exec's batch norm folding its last forward's cache into the kept statistics.
  void fold_statistics(int64_t layer, KeptValues& running_mean, KeptValues& running_variance) override {
    holds(layer);
    const std::optional<LayerCache>& cache = caches_[static_cast<size_t>(layer)];
    TRAINSIM_CHECK(cache.has_value(), "statistics folded without the layer's forward");
    LayerParams statistics = layer_of(layer).init_statistics();
    TRAINSIM_CHECK(statistics.size() == 2, "a batch norm's running mean and variance");
    std::swap(statistics[0].data, kept_values(running_mean).data);
    std::swap(statistics[1].data, kept_values(running_variance).data);
    layer_of(layer).update_statistics(statistics, *cache);
    std::swap(statistics[0].data, kept_values(running_mean).data);
    std::swap(statistics[1].data, kept_values(running_variance).data);
    counts_.add(&BufferCounts::folds);
  }
  void load_kept_weights(int64_t layer, std::span<KeptValues* const> params) override {
    holds(layer);
    const std::vector<std::vector<int64_t>> shapes = layer_of(layer).param_shapes();
    TRAINSIM_CHECK(params.size() == shapes.size(), "kept weights of every parameter");
    LayerParams& into = weights_[static_cast<size_t>(layer)];
    into.clear();
    for (size_t p = 0; p < params.size(); ++p) {
      into.push_back(kept_values(*params[p]));
      into.back().shape = shapes[p];
    }
    counts_.add(&BufferCounts::kept_loads);
    loaded_[static_cast<size_t>(layer)] = true;
  }
  void forward_range(const Network& network, int64_t first, int64_t last, const Tensor* x) override {
    ++library_calls;  // a range's launch, as a GPU network's checked calls count
    holds_range(first, last);
    if (x != nullptr) values_[static_cast<size_t>(first)] = imported(*x);
    Tensor in = held(values_, first, x == nullptr);
    for (int64_t c = first + 1; c <= last + 1; ++c) values_[static_cast<size_t>(c)].reset();
    std::vector<LayerCache> caches;
    Tensor y = trainsim::forward_range(network, weights_, first, last, std::move(in), caches);
    for (int64_t l = first; l <= last; ++l)
      caches_[static_cast<size_t>(l)] = std::move(caches[static_cast<size_t>(l - first)]);
    values_[static_cast<size_t>(last + 1)] = std::move(y);
  }
  PendingLoss forward_range_loss(const Network& network, int64_t first, int64_t last, const Tensor* x,
                                 std::span<const int32_t> labels, float dlogits_scale) override {
    forward_range(network, first, last, x);
    Tensor dlogits;
    const double mean = softmax_cross_entropy(*values_[static_cast<size_t>(last + 1)], labels, &dlogits);
    for (float& v : dlogits.data) v *= dlogits_scale;
    gradients_[static_cast<size_t>(last + 1)] = std::move(dlogits);
    counts_.add(&BufferCounts::losses);
    // Unknown until read, as a GPU's loss still being computed.
    return PendingLoss([mean, &counts = counts_] {
      std::lock_guard lock(counts.mu);
      counts.computed_when_read.push_back(counts.losses);
      return mean;
    });
  }
  std::vector<std::vector<Tensor>> batch_statistics(int64_t first, int64_t last) const override {
    holds_range(first, last);
    counts_.add(&BufferCounts::statistics_back);
    std::vector<std::vector<Tensor>> out;
    for (int64_t l = first; l <= last; ++l) {
      const LayerCache& cache = *caches_[static_cast<size_t>(l)];
      if (layer_of(l).init_statistics().empty()) {
        out.emplace_back();
      } else {
        out.push_back({cache.saved[2], cache.saved[3]});  // exec's batch norm keeps input, -, mean, variance
      }
    }
    return out;
  }
  void backward_range(const Network& network, int64_t first, int64_t last, const Tensor* dy,
                      Gradients& grads) override {
    ++library_calls;
    holds_range(first, last);
    if (dy != nullptr) gradients_[static_cast<size_t>(last + 1)] = imported(*dy);
    Tensor in = held(gradients_, last + 1, dy == nullptr);
    std::vector<LayerCache> caches;
    for (int64_t l = first; l <= last; ++l) {
      std::optional<LayerCache>& cache = caches_[static_cast<size_t>(l)];
      TRAINSIM_CHECK(cache.has_value(), "a backward of layer " + std::to_string(l) + " without its forward");
      caches.push_back(std::move(*cache));
      cache.reset();
    }
    for (int64_t c = first; c <= last + 1; ++c) gradients_[static_cast<size_t>(c)].reset();
    // Each gradient adds where it is: into its kept sum, else the host's.
    Gradients into(grads.size());
    const auto swap_in = [&] {
      for (int64_t l = first; l <= last; ++l) {
        LayerGrads& layer = grads[static_cast<size_t>(l)];
        into[static_cast<size_t>(l)].resize(layer.size());
        for (size_t p = 0; p < layer.size(); ++p) {
          ParamGrad& target = into[static_cast<size_t>(l)][p];
          if (layer[p].dense.resident == nullptr) {
            std::swap(target, layer[p]);
            continue;
          }
          Tensor& kept = kept_values(*static_cast<KeptValues*>(layer[p].dense.resident.get()));
          kept.shape = layer[p].dense.shape;
          std::swap(target.dense, kept);
        }
      }
    };
    swap_in();
    gradients_[static_cast<size_t>(first)] =
        trainsim::backward_range(network, weights_, first, last, std::move(in), caches, into);
    swap_in();  // and back
  }
  Tensor cut_values(const Network&, int64_t i) override {
    holds_cut(i);
    return brought_back(values_, i);
  }
  Tensor cut_gradients(const Network&, int64_t i) override {
    holds_cut(i);
    return brought_back(gradients_, i);
  }
  void queue_after(RangeNetwork& previous) override {
    std::lock_guard lock(counts_.mu);
    TRAINSIM_CHECK(counts_.alive.contains(&previous), "queued after a network already let go");
    counts_.queued_after.emplace_back(&previous, this);
  }
  std::shared_ptr<WorkMark> mark() override { return std::make_shared<HostWorkMark>(); }
  void wait_for(const Tensor& x) override {
    if (x.exported != nullptr) counts_.add(&BufferCounts::input_waits);
  }
  // Packed into an array of the store, as a GPU's export.
  std::shared_ptr<KeptValues> export_cut(const Network&, int64_t i, bool gradient, DeviceStore& store) override {
    holds_cut(i);
    const std::optional<Tensor>& t = (gradient ? gradients_ : values_)[static_cast<size_t>(i)];
    TRAINSIM_CHECK(t.has_value(), "cut " + std::to_string(i) + " exported, but no range left it");
    counts_.add(&BufferCounts::exports);
    Tensor packed = packed_boundary(*t);
    std::shared_ptr<KeptValues> k = store.uninitialized(packed.size());
    TRAINSIM_CHECK(kept_values(*k).size() == packed.size(), "an array of the boundary's size");
    kept_values(*k) = std::move(packed);
    return k;
  }

 private:
  const ExecLayer& layer_of(int64_t layer) const { return *network_->layers[static_cast<size_t>(layer)]; }
  void holds(int64_t layer) const {
    TRAINSIM_CHECK(held_.computes.at(static_cast<size_t>(layer)) != 0,
                   "layer " + std::to_string(layer) + " asked of a network that does not hold it");
  }
  void holds_cut(int64_t i) const {
    TRAINSIM_CHECK(held_.cuts.at(static_cast<size_t>(i)) != 0,
                   "cut " + std::to_string(i) + " asked of a network that does not hold it");
  }
  void holds_range(int64_t first, int64_t last) const {
    for (int64_t l = first; l <= last; ++l) holds(l);
    holds_cut(first);
    holds_cut(last + 1);
  }

  // x, or the packed values of the boundary it names (Tensor::exported).
  Tensor imported(const Tensor& x) {
    if (x.exported == nullptr) return x;
    TRAINSIM_CHECK(store_ == nullptr || dynamic_cast<CpuKept&>(*x.exported->values).memory == store_->memory(),
                   "a boundary exported into another memory's store");
    counts_.add(&BufferCounts::imports);
    Tensor t;
    t.shape = x.shape;
    t.data = kept_values(*x.exported->values).data;
    TRAINSIM_CHECK(t.size() == element_count(t.shape), "an exported boundary of another size");
    return t;
  }

  Tensor held(const std::vector<std::optional<Tensor>>& cuts, int64_t i, bool in_place) {
    const std::optional<Tensor>& t = cuts[static_cast<size_t>(i)];
    TRAINSIM_CHECK(t.has_value(), "cut " + std::to_string(i) + " read in place, but no range left it");
    counts_.add(in_place ? &BufferCounts::in_place : &BufferCounts::uploads);
    return *t;
  }
  Tensor brought_back(const std::vector<std::optional<Tensor>>& cuts, int64_t i) {
    const std::optional<Tensor>& t = cuts[static_cast<size_t>(i)];
    TRAINSIM_CHECK(t.has_value(), "cut " + std::to_string(i) + " brought back, but no range left it");
    counts_.add(&BufferCounts::downloads);
    return *t;
  }

  const CountingStore* store_;
  const Network* network_;
  HeldLayers held_;
  int64_t batch_;
  Weights weights_;
  std::vector<std::optional<LayerCache>> caches_;
  std::vector<std::optional<Tensor>> values_, gradients_;  // per cut
  std::vector<uint8_t> loaded_ = std::vector<uint8_t>(network_->layers.size(), 0);  // per layer: ever loaded
  BufferCounts& counts_;
  std::shared_ptr<MemoryBudget> budget_;  // charged with bytes_
  int64_t bytes_ = 0;
};

// The strategy's run on lending devices over BufferedCpuNetworks, keeping
// the gradient sums in a CountingStore, beside its run on the CPU device;
// with `memory_of`, each worker's device passes boundaries to those of
// the same memory without the host. With `reaches` too, each worker has a
// store of its own in its memory (as each GPU device has), and a boundary
// also passes device to device to a memory reading the sender's, copied
// there into the receiver's store when received. With `transport`, the
// lending run's.
inline void expect_lending_trains_as_the_cpu(
    const RunSpec& spec, BufferCounts::Totals* totals = nullptr, const MemoryOf& memory_of = nullptr,
    const MemoryReaches& reaches = nullptr, const std::function<std::unique_ptr<Transport>(int)>& transport = nullptr) {
  BufferCounts counts;
  RunSpec lending = spec;
  if (transport) lending.make_transport = transport;
  auto shared_store = std::make_shared<CountingStore>(counts);
  lending.make_device = [&](int32_t worker) {
    const int64_t memory = memory_of ? memory_of(worker) : -1;
    std::shared_ptr<CountingStore> store = shared_store;
    ReachesMemory reached;
    if (reaches) {
      store = std::make_shared<CountingStore>(counts, memory);
      reached = [&reaches, memory](int64_t other) { return reaches(memory, other); };
    }
    return make_lending_device(
        [&counts, own = reaches ? store.get() : nullptr](const Network& network, int64_t batch,
                                                         const HeldLayers& held) {
          return std::make_unique<BufferedCpuNetwork>(network, batch, counts, own, &held);
        },
        store, memory, std::move(reached));
  };
  const StrategyRun reference = strategy_runs::run(spec);
  const StrategyRun run = strategy_runs::run(lending);
  EXPECT_EQ(run.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(run.result.traffic.pair_bytes, reference.result.traffic.pair_bytes);
  EXPECT_EQ(run.result.traffic.pair_messages, reference.result.traffic.pair_messages);
  EXPECT_EQ(strategy_runs::largest_weight_gap(run.result.weights, reference.result.weights), 0.0);
  ASSERT_EQ(run.result.statistics.size(), reference.result.statistics.size());
  for (size_t l = 0; l < run.result.statistics.size(); ++l) {
    ASSERT_EQ(run.result.statistics[l].size(), reference.result.statistics[l].size());
    for (size_t p = 0; p < run.result.statistics[l].size(); ++p) {
      EXPECT_EQ(run.result.statistics[l][p].data, reference.result.statistics[l][p].data) << "layer " << l;
    }
  }
  // Every range input that is not the batch, a recompute's or a received
  // boundary is read where the pass's op before left it, and only the
  // boundaries sent come back.
  EXPECT_EQ(counts.uploads, host_inputs(run.plan));
  EXPECT_EQ(counts.in_place, range_ops(run.plan) - host_inputs(run.plan));
  EXPECT_GT(counts.in_place, 0);
  // A boundary sent comes out of the network's buffers once: to the host
  // (a send to a device of another memory), or into an array of the store,
  // read from there by the receiver of the same memory (or set aside there
  // before a later op of its pass overwrote it: DSP's recompute). None
  // comes to the host between devices of one memory.
  const int64_t across = boundary_sends(run.plan, memory_of, false, reaches);
  const int64_t passed = boundary_sends(run.plan, memory_of, true, reaches);
  EXPECT_EQ(counts.downloads + counts.exports, across + passed);
  EXPECT_LE(counts.downloads, across);
  EXPECT_GE(counts.imports, passed);
  if (across == 0) {
    EXPECT_EQ(counts.downloads, 0);
  }
  // Each passed to a memory reading the sender's is copied once, when
  // received, into the receiver's store (the stand-in network refuses
  // another memory's array; a recompute reads the copy again), and none
  // between devices of one memory.
  EXPECT_EQ(counts.peer_copies, boundary_sends(run.plan, memory_of, true, reaches, /*across_memories=*/true));
  // Each network holds its worker's layers alone, those the plan's ops of
  // that worker run (and the stand-in refuses any other layer or cut).
  ASSERT_FALSE(counts.held.empty());
  const std::vector<std::vector<uint8_t>> held =
      worker_layers(run.plan, static_cast<int64_t>(counts.held.front().size()));
  int64_t most_held = 0;
  for (const std::vector<uint8_t>& network : counts.held) {
    EXPECT_NE(std::find(held.begin(), held.end(), network), held.end()) << "a network holding other layers";
    most_held = std::max<int64_t>(most_held, std::count(network.begin(), network.end(), uint8_t{1}));
  }
  // Every loss returned unknown is read once (a recompute's never).
  EXPECT_EQ(static_cast<int64_t>(counts.computed_when_read.size()), loss_forwards(run.plan));
  // Every dense gradient's sum forms on the device; the host's gradient
  // functions refuse what is still kept there, so matching the CPU bit for
  // bit says every read brought them back first.
  EXPECT_GT(counts.zeros, 0);
  if (totals != nullptr) {
    *totals = {counts.waits,
               counts.host_reloads,
               counts.kept_loads,
               counts.steps,
               ops_of(run.plan, OpKind::kBackward),
               ops_of(run.plan, OpKind::kUpdate),
               ops_of(run.plan, OpKind::kAllReduce),
               static_cast<int64_t>(run.plan.workers.size()),
               counts.statistics_back,
               counts.folds,
               counts.copies,
               counts.smooths,
               counts.predictions,
               counts.downloads,
               counts.exports,
               counts.row_steps,
               most_held,
               static_cast<int64_t>(counts.held.front().size()),
               counts.sums_added,
               counts.sums_back};
  }
}

}  // namespace trainsim::buffered
