// The lending device (lending_device.hpp): each pass of its worker borrows
// a network from the device's pool (lending_leases.hpp); the pass's ops
// find their input in its buffers where the op before left it there.
#include "exec/tensor/lending_device.hpp"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "exec/tensor/kept_training.hpp"
#include "exec/tensor/lending_leases.hpp"
#include "exec/tensor/work_marks.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

using lending::bring_back;
using lending::CacheHold;
using lending::Lease;
using lending::Lent;
using lending::Pool;
using lending::Resident;
using lending::with_exported;

class LendingDevice final : public Device {
 public:
  LendingDevice(MakeRangeNetwork make, std::shared_ptr<DeviceStore> store, int64_t shared_memory, ReachesMemory reaches,
                std::shared_ptr<const MemoryBudget> budget)
      : pool_(std::make_shared<Pool>()),
        shared_memory_(store != nullptr ? shared_memory : -1),
        reaches_(std::move(reaches)),
        budget_(std::move(budget)) {
    pool_->make = std::move(make);
    pool_->store = store;
    if (store != nullptr) {
      // An array past the worker's share is made once its idle networks go.
      store->when_full([pool = std::weak_ptr<Pool>(pool_)] {
        if (const std::shared_ptr<Pool> p = pool.lock()) lending::drop_idle(*p);
      });
      kept_ = std::make_unique<KeptTraining>(std::move(store));
    }
  }

  MemoryUse memory_use() const override {
    return budget_ == nullptr ? MemoryUse{} : MemoryUse{budget_->peak(), budget_->limit()};
  }

  void hold_ranges(std::span<const LayerRange> ranges) override {
    std::lock_guard lock(pool_->mu);
    TRAINSIM_CHECK(pool_->held == nullptr, "ranges told after a network was made");
    pool_->ranges.assign(ranges.begin(), ranges.end());
  }

  Gradients zero_gradients(const Network& network, const Weights& weights) override {
    return trainsim::zero_gradients(network, weights);
  }

  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    std::lock_guard lock(mu_);
    const auto [lease, in] = lend(network, pass, first, x);
    lease->lent.load(weights, generation, first, last, kept_.get());
    in_compute_order(lease->lent.network, in);
    lease->lent.network->forward_range(network, first, last, in);
    marks_.after(*lease->lent.network);
    keep(lease, first, last, x.rows(), caches);
    return left(network, lease, last + 1, false, x.rows());
  }

  // The loss beside the logits; dL/dlogits stays there for the backward.
  PendingLoss forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                           int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                           std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) override {
    std::lock_guard lock(mu_);
    const auto [lease, in] = lend(network, pass, first, x);
    lease->lent.load(weights, generation, first, last, kept_.get());
    in_compute_order(lease->lent.network, in);
    PendingLoss loss = lease->lent.network->forward_range_loss(network, first, last, in, labels, dlogits_scale);
    marks_.after(*lease->lent.network);
    keep(lease, first, last, x.rows(), caches);
    dlogits = left(network, lease, last + 1, true, x.rows());
    return loss;
  }

  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId /*pass*/,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override {
    std::lock_guard lock(mu_);
    TRAINSIM_CHECK(static_cast<int64_t>(caches.size()) == last - first + 1 && !caches.empty(),
                   "caches are not one per layer of the range");
    const auto* hold = static_cast<const CacheHold*>(caches.front().device_state.get());
    for (const LayerCache& cache : caches) {
      const auto* h = static_cast<const CacheHold*>(cache.device_state.get());
      TRAINSIM_CHECK(h != nullptr && hold != nullptr && h->lease == hold->lease,
                     "a backward over layers one forward on this device did not run");
    }
    const std::shared_ptr<Lease> lease = hold->lease;
    const bool held = in_place(lease, last + 1, true, dy);
    if (!held) readable(dy);
    evict_others(*lease, dy);
    lease->lent.load(weights, generation, first, last, kept_.get());
    in_compute_order(lease->lent.network, held ? nullptr : &dy);
    if (kept_ == nullptr) {
      lease->lent.network->backward_range(network, first, last, held ? nullptr : &dy, grads);
    } else {
      KeptTraining::Targets targets(*kept_, grads, first, last);
      lease->lent.network->backward_range(network, first, last, held ? nullptr : &dy, targets.into);
    }
    marks_.after(*lease->lent.network);
    if (first == 0) return {};  // dL/d(the model's input): nobody reads it
    return left(network, lease, first, true, dy.rows());
  }

  // With a store, folded on the device by the network the forward ran on;
  // else from the statistics the forward brought back.
  void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                         Statistics& statistics) override {
    if (kept_ == nullptr) return trainsim::update_statistics(network, first, last, caches, statistics);
    std::lock_guard lock(mu_);
    for (int64_t l = first; l <= last; ++l) {
      if (statistics.at(static_cast<size_t>(l)).empty()) continue;
      const auto* hold = static_cast<const CacheHold*>(caches.at(static_cast<size_t>(l - first)).device_state.get());
      TRAINSIM_CHECK(hold != nullptr, "statistics of a forward this device did not run");
      kept_->fold_statistics(*hold->lease->lent.network, l, statistics[static_cast<size_t>(l)]);
      marks_.after(*hold->lease->lent.network);  // the forward's work, timed, ends after its folds
    }
  }

  void time_work_of(int64_t op) override { marks_.time(op); }  // the compute thread's alone: no lock
  std::vector<WorkTime> work_times() override {
    std::lock_guard lock(mu_);
    return marks_.times();
  }

  double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) override {
    return softmax_cross_entropy(logits, labels, dlogits);
  }

  void to_host(Tensor& t) override {
    std::lock_guard lock(mu_);
    to_host_locked(t);
  }

  int64_t shared_memory() const override { return shared_memory_; }

  bool reaches(const Device& other) const override {
    const int64_t memory = other.shared_memory();
    if (shared_memory_ < 0 || memory < 0) return false;
    return memory == shared_memory_ || (reaches_ != nullptr && reaches_(memory));
  }

  // An array for the receiver alone (one that two devices read at once
  // would have its event recorded by two streams, each read ordering only
  // itself): copied out of the network's buffers, the tensor staying in
  // them, or from the array it was set aside (or received) into. One on
  // the host stays there.
  Tensor export_boundary(Tensor t) override {
    std::lock_guard lock(mu_);
    if (shared_memory_ < 0 || (t.resident == nullptr && t.exported == nullptr)) {
      to_host_locked(t);
      return t;
    }
    std::shared_ptr<const ExportedBoundary> aside = t.exported;
    if (t.resident != nullptr) {
      const Resident& r = resident_of(t);
      if (r.lease != nullptr) {
        return with_exported(t.shape, export_of(r));
      }
      aside = r.exported;
      if (aside == nullptr) {  // brought back to the host
        to_host_locked(t);
        return t;
      }
    }
    // Into this device's store, also where it was received from another
    // memory: a receiver reads the memory it is tagged with.
    const std::shared_ptr<DeviceStore>& mine = kept_->store();
    return with_exported(t.shape, std::make_shared<ExportedBoundary>(
                                      ExportedBoundary{mine, mine->copy(*aside->values), shared_memory_}));
  }

  Tensor import_boundary(Tensor t) override {
    in_own_memory(t);
    return t;
  }

  // An array of the store, in this device's memory.
  std::shared_ptr<const ExportedBoundary> boundary_array(int64_t floats) override {
    if (shared_memory_ < 0 || kept_ == nullptr) return nullptr;
    const std::shared_ptr<DeviceStore>& mine = kept_->store();
    return std::make_shared<ExportedBoundary>(ExportedBoundary{mine, mine->uninitialized(floats), shared_memory_});
  }

  // The kept sums of the range to the host together; the device's lock is
  // not held while the store waits for them, so the worker's next ops go on.
  void gradients_to_host(Gradients& grads, int64_t first, int64_t last) override {
    if (kept_ == nullptr) return Device::gradients_to_host(grads, first, last);
    kept_->gradients_to_host(grads, first, last);
  }

  // A server's received gradients added and their mean taken where the sums
  // are kept; a host's sum coming back taken up as them.
  void add_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last) override {
    if (kept_ == nullptr) return Device::add_flat_gradients(flat, grads, first, last);
    kept_->add_flat(flat, grads, first, last);
  }
  void scale_gradients(Gradients& grads, float factor, int64_t first, int64_t last) override {
    if (kept_ == nullptr) return Device::scale_gradients(grads, factor, first, last);
    kept_->scale(grads, factor, first, last);
  }
  bool take_flat_gradients(std::span<const float> flat, Gradients& grads, int64_t first, int64_t last,
                           bool dense_only) override {
    return kept_ != nullptr && kept_->take_flat(flat, grads, first, last, dense_only);
  }

  // The sums kept here handed to the library where they are.
  bool all_reduce_kept(Gradients& grads, int64_t first, int64_t last, bool dense_only, const SumKept& sum) override {
    return kept_ != nullptr && kept_->all_reduce(grads, first, last, dense_only, sum);
  }

  // A range stepped on the device (a sparse table by its rows), else on the host.
  void step(Sgd& sgd, Weights& weights, Gradients& grads, int64_t first, int64_t last) override {
    if (kept_ != nullptr) {
      std::lock_guard lock(mu_);
      if (kept_->step(sgd, weights, grads, first, last)) return;
    }
    weights_to_host(weights, first, last, &sgd, nullptr);
    Device::step(sgd, weights, grads, first, last);
  }

  // SpecTrain's update of a dense range on the device, else on the host.
  void step_spectrain(Sgd& sgd, SpecTrain& spectrain, Weights& weights, Gradients& grads, int64_t first,
                      int64_t last) override {
    if (kept_ != nullptr) {
      std::lock_guard lock(mu_);
      if (kept_->step(sgd, weights, grads, first, last, &spectrain)) return;
    }
    weights_to_host(weights, first, last, &sgd, &spectrain);
    Device::step_spectrain(sgd, spectrain, weights, grads, first, last);
  }

  // Predicted on the device where it keeps the range's weights, else on the host.
  void predict_weights(SpecTrain& spectrain, Weights& weights, int64_t version_difference, int64_t first, int64_t last,
                       Weights& out, const SpecTrain::Only& only) override {
    if (kept_ != nullptr) {
      std::lock_guard lock(mu_);
      if (kept_->predict(spectrain, weights, version_difference, first, last, out, only)) return;
    }
    Device::predict_weights(spectrain, weights, version_difference, first, last, out, only);
  }

  // The weights a step left on the device copied there.
  Weights copy_weights(Weights& weights, std::span<const uint8_t> layers) override {
    if (kept_ == nullptr) return Device::copy_weights(weights, layers);
    std::lock_guard lock(mu_);  // the copies ordered after the loads before them
    return kept_->copy_weights(weights, layers);
  }

  void weights_to_host(Weights& weights, int64_t first, int64_t last, Sgd* sgd, SpecTrain* spectrain) override {
    if (kept_ == nullptr) return Device::weights_to_host(weights, first, last, sgd, spectrain);
    std::lock_guard lock(mu_);
    kept_->weights_to_host(weights, first, last, sgd, spectrain);
  }

 private:
  Resident& resident_of(const Tensor& t) const {
    auto& r = *static_cast<Resident*>(t.resident.get());
    TRAINSIM_CHECK(r.device == this, "a tensor another device keeps");
    return r;
  }

  // Its values out of the network's buffers before an op overwrites them:
  // into an array of the store, on the network's stream (no wait), else to
  // the host. Callers hold mu_.
  void set_aside(Resident& r) const {
    if (r.lease == nullptr) return;
    if (kept_ == nullptr) return bring_back(r, {});
    r.exported = export_of(r);
    r.lease.reset();
  }

  // r's values copied out of its network's buffers into a new array of the
  // store. Callers hold mu_; r.lease is set.
  std::shared_ptr<const ExportedBoundary> export_of(const Resident& r) const {
    return std::make_shared<ExportedBoundary>(ExportedBoundary{
        kept_->store(), r.lease->lent.network->export_cut(*r.network, r.cut, r.gradient, *kept_->store()),
        shared_memory_});
  }

  // A range's input that is not in place, as the network reads it: with a
  // store, one still in a network's buffers is set aside into an array and
  // read from there (device to device), else it comes to the host.
  // Callers hold mu_.
  void readable(Tensor& t) {
    if (t.exported != nullptr) return in_own_memory(t);
    if (t.resident != nullptr && kept_ != nullptr) {
      Resident& r = resident_of(t);
      set_aside(r);
      if (r.exported != nullptr) {  // read by this device alone
        t = with_exported(t.shape, r.exported);
        return;
      }
    }
    to_host_locked(t);
  }

  // An exported t in this device's memory: one of another memory (a peer
  // GPU's, which this one reads) copied into an array of the store; without
  // a store, brought to the host.
  void in_own_memory(Tensor& t) const {
    if (t.exported == nullptr || t.exported->memory == shared_memory_) return;
    if (kept_ == nullptr) return exported_to_host(t);
    const std::shared_ptr<DeviceStore>& mine = kept_->store();
    t = with_exported(t.shape, std::make_shared<ExportedBoundary>(
                                   ExportedBoundary{mine, mine->copy(*t.exported->values), shared_memory_}));
  }

  // Whether `t` is cut `cut`'s values (or gradients) in the buffers of `lease`.
  bool in_place(const std::shared_ptr<Lease>& lease, int64_t cut, bool gradient, const Tensor& t) const {
    if (t.resident == nullptr) return false;
    const Resident& r = resident_of(t);
    return r.lease == lease && r.cut == cut && r.gradient == gradient;
  }

  // Tensors left in the network's buffers but `kept` (the op's input, read
  // in place) are set aside (set_aside) before the op may overwrite them; `kept` is
  // looked at again by the next op, should a copy of it still be held
  // (DSP's recompute keeps its forward's input). Callers hold mu_.
  void evict_others(Lease& lease, const Tensor& kept) const {
    const void* spared = kept.resident.get();
    std::vector<std::weak_ptr<Resident>> still;
    for (const std::weak_ptr<Resident>& weak : lease.residents) {
      const std::shared_ptr<Resident> r = weak.lock();
      if (r == nullptr) continue;
      if (r.get() == spared) {
        still.push_back(weak);
      } else {
        set_aside(*r);
      }
    }
    lease.residents = std::move(still);
  }

  // The network for a forward of `pass` from layer `first` on x, and the
  // input to upload (null where x is in its buffers already): the pass's
  // network that holds x, else one of the pass's of x's rows whose caches
  // from `first` on are gone, else an idle one, else a new one. Callers
  // hold mu_.
  std::pair<std::shared_ptr<Lease>, const Tensor*> lend(const Network& network, PassId pass, int64_t first, Tensor& x) {
    for (auto& [_, leases] : passes_) {
      std::erase_if(leases, [](const std::weak_ptr<Lease>& l) { return l.expired(); });
    }
    std::erase_if(passes_, [](const auto& entry) { return entry.second.empty(); });
    std::vector<std::weak_ptr<Lease>>& mine = passes_[pass];
    std::shared_ptr<Lease> lease;
    if (x.resident != nullptr) {
      const Resident& r = resident_of(x);
      if (r.lease != nullptr && r.lease->pass == pass && r.cut == first && !r.gradient && r.lease->free_from(first)) {
        lease = r.lease;
      }
    }
    const bool held = lease != nullptr;
    for (size_t i = 0; lease == nullptr && i < mine.size(); ++i) {
      std::shared_ptr<Lease> l = mine[i].lock();
      if (l != nullptr && l->lent.network->batch() == x.rows() && l->free_from(first)) lease = std::move(l);
    }
    if (lease == nullptr) {
      lease = lending::fresh(pool_, network, pass, x.rows());
      mine.push_back(lease);
    }
    if (!held) readable(x);
    evict_others(*lease, held ? x : Tensor());
    return {lease, held ? nullptr : &x};
  }

  // The worker's compute ops run one after another, as the plan's compute
  // stream orders them and the simulator times them: a range's work on one
  // network waits for what the last range queued on another, so the passes
  // in flight (a pipeline's micro-batches) do not run side by side on the
  // GPU. Called once the range's weights are loaded: their copies up, into
  // this network's own buffers, need not wait (a copy from pageable memory
  // would hold the host until the stream's work before it is done). A
  // network dropped since (to make room for another) finished its work as
  // it went. The op's work, timed, starts once that work and its `input`
  // from another network are done. Callers hold mu_.
  void in_compute_order(const std::shared_ptr<RangeNetwork>& next, const Tensor* input) {
    const std::shared_ptr<RangeNetwork> last = last_computed_.lock();
    if (last != nullptr && last != next) next->queue_after(*last);
    last_computed_ = next;
    if (input != nullptr) next->wait_for(*input);
    marks_.before(*next);
  }

  void to_host_locked(Tensor& t) {
    exported_to_host(t);
    if (t.resident == nullptr) return;
    Resident& r = resident_of(t);
    bring_back(r, t.shape);
    Tensor host = r.host;  // t may hold the last reference to r
    t = std::move(host);
  }

  // The forward's caches hold its network until the backward; without a
  // store, batch normalization's statistics come back as exec's batch norm
  // keeps them.
  void keep(const std::shared_ptr<Lease>& lease, int64_t first, int64_t last, int64_t rows,
            std::vector<LayerCache>& caches) const {
    std::vector<std::vector<Tensor>> statistics =
        kept_ != nullptr ? std::vector<std::vector<Tensor>>(static_cast<size_t>(last - first + 1))
                         : lease->lent.network->batch_statistics(first, last);
    TRAINSIM_CHECK(static_cast<int64_t>(statistics.size()) == last - first + 1,
                   "statistics of every layer of the range");
    caches.assign(static_cast<size_t>(last - first + 1), LayerCache{});
    for (int64_t i = first; i <= last; ++i) {
      LayerCache& cache = caches[static_cast<size_t>(i - first)];
      cache.device_state = std::make_shared<CacheHold>(lease, static_cast<size_t>(i));
      std::vector<Tensor>& stats = statistics[static_cast<size_t>(i - first)];
      if (!stats.empty()) {  // as exec's batch norm keeps them: input (for its rows), -, mean, variance
        cache.saved = {Tensor({rows}), Tensor(), std::move(stats[0]), std::move(stats[1])};
      }
    }
  }

  // Cut `cut`'s values (or gradients), left in the network's buffers: its
  // shape (rows, then the cut's packed shape per sample) and no data.
  Tensor left(const Network& network, const std::shared_ptr<Lease>& lease, int64_t cut, bool gradient, int64_t rows) {
    auto r = std::make_shared<Resident>(Resident{this, &network, lease, cut, gradient, Tensor(), nullptr});
    lease->residents.push_back(r);
    Tensor t;
    const std::vector<int64_t>& sample = network.cut_shapes[static_cast<size_t>(cut)];
    t.shape.push_back(rows);
    t.shape.insert(t.shape.end(), sample.begin(), sample.end());
    t.resident = std::move(r);
    return t;
  }

  std::shared_ptr<Pool> pool_;
  int64_t shared_memory_;                                       // Device::shared_memory
  ReachesMemory reaches_;                                       // null: no memory but its own
  std::shared_ptr<const MemoryBudget> budget_;                  // what its networks and store charge
  std::unique_ptr<KeptTraining> kept_;                          // null: gradients and steps on the host
  std::mutex mu_;                                               // one pass at a time
  std::map<PassId, std::vector<std::weak_ptr<Lease>>> passes_;  // the networks lent to each pass
  std::weak_ptr<RangeNetwork> last_computed_;                   // the network of the last range (in_compute_order)
  OpWorkMarks marks_;                                           // the timed ops' work (Device::time_work_of)
};

}  // namespace

std::unique_ptr<Device> make_lending_device(MakeRangeNetwork make_network, std::shared_ptr<DeviceStore> store,
                                            int64_t shared_memory, ReachesMemory reaches,
                                            std::shared_ptr<const MemoryBudget> budget) {
  return std::make_unique<LendingDevice>(std::move(make_network), std::move(store), shared_memory, std::move(reaches),
                                         std::move(budget));
}

}  // namespace trainsim
