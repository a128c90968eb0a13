// The interpreter's GPU device: CudaNetwork's range passes, with a network
// (activations for the whole model at one batch size) lent to each forward
// until its caches go; a network loads a layer's weights only when it
// holds another generation of them.
#include "exec/cuda/cuda_device.hpp"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

// A network on the GPU and the generations its weights' layers hold.
struct Lent {
  std::unique_ptr<CudaNetwork> network;
  LoadedWeights loaded;

  // The layers of [first, last] that hold another generation get `weights`.
  void load(const Weights& weights, WeightsGeneration generation, int64_t first, int64_t last) {
    const std::vector<int64_t> stale = loaded.stale(weights, generation, first, last);
    for (const int64_t l : stale) network->load_weights(weights, l, l);
    loaded.loaded(stale, generation);
  }
};

// The networks a device lends, by batch size; shared with the leases, which
// may end on any thread.
struct Pool {
  Model model;
  int gpu = 0;
  CudaNetworkOptions options;
  std::mutex mu;
  std::map<int64_t, std::vector<Lent>> idle;
};

// One forward's network, back to the pool when the last cache holding it goes.
struct Lease {
  std::shared_ptr<Pool> pool;
  Lent lent;
  Lease(std::shared_ptr<Pool> p, Lent l) : pool(std::move(p)), lent(std::move(l)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    std::lock_guard lock(pool->mu);
    pool->idle[lent.network->batch()].push_back(std::move(lent));
  }
};

// Zeros shaped like every parameter: the lent networks' weights are loaded per range.
Weights zero_weights(const Network& network) {
  Weights w(network.layers.size());
  for (size_t i = 0; i < network.layers.size(); ++i) {
    for (const std::vector<int64_t>& shape : network.layers[i]->param_shapes()) w[i].emplace_back(shape);
  }
  return w;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(const Model& model, int gpu, CudaPrecision precision) : pool_(std::make_shared<Pool>()) {
    pool_->model = model;
    pool_->gpu = gpu;
    pool_->options.precision = precision;
    pool_->options.input_gradient = true;  // a stage after the first sends dL/d(its input) back
  }

  Gradients zero_gradients(const Network& network, const Weights& weights) override {
    return trainsim::zero_gradients(network, weights);
  }

  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId /*pass*/,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    std::lock_guard lock(mu_);
    std::shared_ptr<Lease> lease = lend(network, x.rows());
    lease->lent.load(weights, generation, first, last);
    Tensor y = lease->lent.network->forward_range(network, first, last, x);
    keep(lease, first, last, x.rows(), caches);
    return y;
  }

  // The loss on the GPU, beside the logits: only dL/dlogits comes back.
  double forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation, PassId /*pass*/,
                      int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                      std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) override {
    std::lock_guard lock(mu_);
    std::shared_ptr<Lease> lease = lend(network, x.rows());
    lease->lent.load(weights, generation, first, last);
    const double loss = lease->lent.network->forward_range_loss(network, first, last, x, labels, dlogits);
    for (float& v : dlogits.data) v *= dlogits_scale;
    keep(lease, first, last, x.rows(), caches);
    return loss;
  }

 private:
  // The forward's caches hold its network until the backward; batch
  // normalization's statistics come back as exec's batch norm keeps them.
  static void keep(const std::shared_ptr<Lease>& lease, int64_t first, int64_t last, int64_t rows,
                   std::vector<LayerCache>& caches) {
    CudaNetwork& gpu = *lease->lent.network;
    caches.assign(static_cast<size_t>(last - first + 1), LayerCache{});
    for (int64_t i = first; i <= last; ++i) {
      LayerCache& cache = caches[static_cast<size_t>(i - first)];
      cache.device_state = lease;
      std::vector<Tensor> stats = gpu.batch_statistics(i);
      if (!stats.empty()) {  // as exec's batch norm keeps them: input (for its rows), -, mean, variance
        cache.saved = {Tensor({rows}), Tensor(), std::move(stats[0]), std::move(stats[1])};
      }
    }
  }

 public:
  Tensor backward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId /*pass*/,
                  int64_t first, int64_t last, Tensor dy, const std::vector<LayerCache>& caches,
                  Gradients& grads) override {
    std::lock_guard lock(mu_);
    TRAINSIM_CHECK(static_cast<int64_t>(caches.size()) == last - first + 1 && !caches.empty(),
                   "caches are not one per layer of the range");
    for (const LayerCache& cache : caches) {
      TRAINSIM_CHECK(cache.device_state != nullptr && cache.device_state == caches.front().device_state,
                     "a GPU backward over layers one GPU forward did not run");
    }
    Lent& lent = static_cast<Lease*>(caches.front().device_state.get())->lent;
    lent.load(weights, generation, first, last);
    return lent.network->backward_range(network, first, last, dy, grads);
  }

  void update_statistics(const Network& network, int64_t first, int64_t last, const std::vector<LayerCache>& caches,
                         Statistics& statistics) override {
    trainsim::update_statistics(network, first, last, caches, statistics);
  }

  double loss(const Tensor& logits, std::span<const int32_t> labels, Tensor* dlogits) override {
    return softmax_cross_entropy(logits, labels, dlogits);
  }

 private:
  // An idle network of `batch` rows, or a new one.
  std::shared_ptr<Lease> lend(const Network& network, int64_t batch) {
    {
      std::lock_guard lock(pool_->mu);
      std::vector<Lent>& idle = pool_->idle[batch];
      if (!idle.empty()) {
        Lent lent = std::move(idle.back());
        idle.pop_back();
        return std::make_shared<Lease>(pool_, std::move(lent));
      }
    }
    Lent lent{std::make_unique<CudaNetwork>(pool_->model, zero_weights(network), batch, pool_->gpu, pool_->options),
              LoadedWeights(network.layers.size())};
    return std::make_shared<Lease>(pool_, std::move(lent));
  }

  std::shared_ptr<Pool> pool_;
  std::mutex mu_;  // one pass at a time
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(const Model& model, int gpu, CudaPrecision precision) {
  check_cuda_device(model, gpu, "--devices");
  return std::make_unique<CudaDevice>(model, gpu, precision);
}

}  // namespace trainsim
