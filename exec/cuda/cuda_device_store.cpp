// The GPU device's store (cuda_device_store.hpp). An array's event orders
// the streams that touch it: the store's stream zeroes, fills and steps it,
// its second stream copies it back, a third copies in a peer GPU's arrays
// (and a fourth records an array's event after a peer's copy out of it), a
// network's stream adds a backward's share into a sum or loads a layer's
// weights from it, each after waiting for the work before.
#include "exec/cuda/cuda_device_store.hpp"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_buffer_pool.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace cuda {
namespace {

// The store's streams, its buffers let go, and the pinned memory arrays come back through.
struct StoreCore {
  int gpu = 0;
  std::shared_ptr<MemoryBudget> budget;  // its worker's (make_cuda_device_store); null: none
  std::function<void()> make_room;       // DeviceStore::when_full
  cudaStream_t stream = nullptr;
  // The copies to the host, on a stream of their own: a copy the
  // communication thread asks for waits for its arrays' work alone, not for
  // a step the compute thread queued before it.
  cudaStream_t down = nullptr;
  // Copies in from a peer GPU's arrays, on a stream of their own: one waits
  // for the sender's work, which must not hold up the store's other jobs.
  cudaStream_t peer = nullptr;
  // Where an array a peer GPU's store copied has its event recorded after
  // that copy (an event is recorded on a stream of its own GPU), so the
  // wait holds up none of this store's other jobs.
  cudaStream_t released = nullptr;
  BufferPool pool;
  std::mutex copy_mu;  // the pinned memory, while copies land in it: not `mu`, which a backward
                       // making a sum takes, so a copy's wait does not hold up the compute
  float* pinned = nullptr;
  size_t pinned_floats = 0;
  cudaEvent_t copied = nullptr;  // after a to_host's copies: waited for alone, not the stream's later work
  // Pinned memory from_host_all's values go up through, and the event after
  // their copies, which the next one waits for before writing it again.
  std::mutex up_mu;
  float* up = nullptr;
  size_t up_floats = 0;
  cudaEvent_t uploaded = nullptr;

  ~StoreCore() {
    cudaSetDevice(gpu);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    if (down != nullptr) cudaStreamSynchronize(down);
    if (peer != nullptr) cudaStreamSynchronize(peer);
    if (released != nullptr) cudaStreamSynchronize(released);
    pool.clear();
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (copied != nullptr) cudaEventDestroy(copied);
    if (up != nullptr) cudaFreeHost(up);
    if (uploaded != nullptr) cudaEventDestroy(uploaded);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (down != nullptr) cudaStreamDestroy(down);
    if (peer != nullptr) cudaStreamDestroy(peer);
    if (released != nullptr) cudaStreamDestroy(released);
  }
};

// An array whose buffer and event go back to the store when the last
// gradient or weight naming it lets go.
struct PooledArray final : KeptArray {
  std::shared_ptr<StoreCore> home;
  ~PooledArray() override { home->pool.give_back(std::move(values), written); }
};

class CudaDeviceStore final : public DeviceStore {
 public:
  CudaDeviceStore(int gpu, std::shared_ptr<MemoryBudget> budget) : core_(std::make_shared<StoreCore>()) {
    core_->gpu = gpu;
    core_->budget = std::move(budget);
    TRAINSIM_CUDA(cudaSetDevice(gpu));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&core_->stream, cudaStreamNonBlocking));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&core_->down, cudaStreamNonBlocking));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&core_->peer, cudaStreamNonBlocking));
    TRAINSIM_CUDA(cudaStreamCreateWithFlags(&core_->released, cudaStreamNonBlocking));
    TRAINSIM_CUDA(cudaEventCreateWithFlags(&core_->copied, cudaEventDisableTiming));
    TRAINSIM_CUDA(cudaEventCreateWithFlags(&core_->uploaded, cudaEventDisableTiming));
  }

  void when_full(std::function<void()> make_room) override { core_->make_room = std::move(make_room); }

  std::shared_ptr<KeptValues> zeros(int64_t floats) override {
    std::shared_ptr<PooledArray> a = lend(floats);
    if (floats > 0) TRAINSIM_CUDA(cudaMemsetAsync(a->values.get(), 0, a->values.bytes(), core_->stream));
    TRAINSIM_CUDA(cudaEventRecord(a->written, core_->stream));
    return a;
  }

  void free_idle() override {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    core_->pool.free_idle();
  }

  // Nothing queued: the writer's stream waits for the array's event.
  std::shared_ptr<KeptValues> uninitialized(int64_t floats) override { return lend(floats, /*store_waits=*/false); }

  std::shared_ptr<KeptValues> from_host(std::span<const float> values) override {
    std::shared_ptr<PooledArray> a = lend(static_cast<int64_t>(values.size()));
    // From pageable memory: the call returns once the values are staged.
    if (!values.empty()) {
      TRAINSIM_CUDA(
          cudaMemcpyAsync(a->values.get(), values.data(), a->values.bytes(), cudaMemcpyHostToDevice, core_->stream));
    }
    TRAINSIM_CUDA(cudaEventRecord(a->written, core_->stream));
    return a;
  }

  // All of them through one pinned buffer: the host copies them in, then
  // each goes up without a wait.
  std::vector<std::shared_ptr<KeptValues>> from_host_all(std::span<const std::span<const float>> values) override {
    std::vector<std::shared_ptr<KeptValues>> out;
    if (values.empty()) return out;
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    size_t floats = 0;
    for (const std::span<const float> v : values) {
      out.push_back(lend(static_cast<int64_t>(v.size())));
      floats += v.size();
    }
    std::lock_guard lock(core_->up_mu);
    TRAINSIM_CUDA(cudaEventSynchronize(core_->uploaded));  // the last copies out of it are done
    grown_pinned(core_->up, core_->up_floats, floats);
    size_t at = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      std::copy(values[i].begin(), values[i].end(), core_->up + at);
      auto& a = static_cast<PooledArray&>(*out[i]);
      if (!values[i].empty()) {
        TRAINSIM_CUDA(
            cudaMemcpyAsync(a.values.get(), core_->up + at, a.values.bytes(), cudaMemcpyHostToDevice, core_->stream));
      }
      TRAINSIM_CUDA(cudaEventRecord(a.written, core_->stream));
      at += values[i].size();
    }
    TRAINSIM_CUDA(cudaEventRecord(core_->uploaded, core_->stream));
    return out;
  }

  void to_host(std::span<KeptValues* const> kept, std::span<const std::span<float>> into, bool add) override {
    TRAINSIM_CHECK(kept.size() == into.size(), "a host buffer per kept array");
    std::lock_guard lock(core_->copy_mu);
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    size_t floats = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      const KeptArray& k = of_this_gpu(kept[i]);
      TRAINSIM_CHECK(
          static_cast<size_t>(k.values.size()) == into[i].size(),
          "a kept array of " + std::to_string(k.values.size()) + " values for " + std::to_string(into[i].size()));
      floats += into[i].size();
    }
    grown_pinned(core_->pinned, core_->pinned_floats, floats);
    size_t at = 0;
    for (KeptValues* k : kept) {
      KeptArray& a = of_this_gpu(k);
      TRAINSIM_CUDA(cudaStreamWaitEvent(core_->down, a.written, 0));
      if (a.values.size() > 0) {
        TRAINSIM_CUDA(
            cudaMemcpyAsync(core_->pinned + at, a.values.get(), a.values.bytes(), cudaMemcpyDeviceToHost, core_->down));
      }
      TRAINSIM_CUDA(cudaEventRecord(a.written, core_->down));
      at += static_cast<size_t>(a.values.size());
    }
    TRAINSIM_CUDA(cudaEventRecord(core_->copied, core_->down));
    TRAINSIM_CUDA(cudaEventSynchronize(core_->copied));
    at = 0;
    for (const std::span<float>& host : into) {
      if (add) {
        for (float& v : host) v += core_->pinned[at++];
      } else {
        std::copy_n(core_->pinned + at, host.size(), host.begin());
        at += host.size();
      }
    }
  }

  // A device-to-device copy after the work on `values`; their event then
  // also follows the copy, so a step writing them waits for it.
  std::shared_ptr<KeptValues> copy(KeptValues& values) override {
    auto* pooled = dynamic_cast<PooledArray*>(&values);
    if (pooled != nullptr && pooled->gpu != core_->gpu) return copy_from_peer(*pooled);
    KeptArray& from = of_this_gpu(&values);
    std::shared_ptr<PooledArray> a = lend(from.values.size());
    KeptArray* const arrays[] = {&from, a.get()};
    in_turn(arrays, [&] {
      if (from.values.size() > 0) {
        TRAINSIM_CUDA(cudaMemcpyAsync(a->values.get(), from.values.get(), from.values.bytes(), cudaMemcpyDeviceToDevice,
                                      core_->stream));
      }
    });
    return a;
  }

  void smooth(KeptValues& smoothed, KeptValues& grad, float gamma, float rest) override {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    KeptArray& v = of_this_gpu(&smoothed);
    KeptArray& g = of_this_gpu(&grad);
    TRAINSIM_CHECK(v.values.size() == g.values.size(), "a smoothed gradient of another size than its gradient");
    KeptArray* const arrays[] = {&v, &g};
    in_turn(arrays, [&] {
      cuda::spectrain_smooth(v.values.get(), g.values.get(), v.values.size(), gamma, rest, core_->stream);
    });
  }

  void add_scaled(KeptValues& sum, KeptValues* values, float scale) override {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    KeptArray& s = of_this_gpu(&sum);
    KeptArray* v = values == nullptr ? nullptr : &of_this_gpu(values);
    TRAINSIM_CHECK(v == nullptr || v->values.size() == s.values.size(), "a gradient added into a sum of another size");
    KeptArray* const arrays[] = {&s, v};
    in_turn(arrays, [&] {
      cuda::add_scaled(s.values.get(), v == nullptr ? nullptr : v->values.get(), s.values.size(), scale, core_->stream);
    });
  }

  std::shared_ptr<KeptValues> predict(KeptValues& weights, KeptValues& smoothed, float step) override {
    KeptArray& w = of_this_gpu(&weights);
    KeptArray& v = of_this_gpu(&smoothed);
    TRAINSIM_CHECK(w.values.size() == v.values.size(), "a smoothed gradient of another size than its weights");
    std::shared_ptr<PooledArray> out = lend(w.values.size());  // sets the GPU
    KeptArray* const arrays[] = {&w, &v, out.get()};
    in_turn(arrays, [&] {
      cuda::spectrain_predict(out->values.get(), w.values.get(), v.values.get(), w.values.size(), step, core_->stream);
    });
    return out;
  }

  // Sgd::step_dense's arithmetic (exec/optim/sgd.cpp), as sgd_step_all.
  void sgd_step(KeptValues& weights, KeptValues& grad, KeptValues* velocity, const SgdOptions& options) override {
    SgdOptions one_step = options;
    if (velocity == nullptr) one_step.momentum = 0;  // none kept where the momentum is 0
    const SgdArrays arrays{&weights, &grad, velocity};
    sgd_step_all(std::span<const SgdArrays>(&arrays, 1), one_step);
  }

  // Sgd::step_sparse's arithmetic on the listed rows, one launch after
  // the work on each array.
  void sgd_step_rows(KeptValues& weights, KeptValues* velocity, KeptValues& rows, KeptValues& values, int64_t count,
                     int64_t width, const SgdOptions& options) override {
    if (count == 0) return;
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    KeptArray& w = of_this_gpu(&weights);
    KeptArray* v = velocity == nullptr ? nullptr : &of_this_gpu(velocity);
    KeptArray& r = of_this_gpu(&rows);
    KeptArray& g = of_this_gpu(&values);
    static_assert(sizeof(int64_t) == 2 * sizeof(float));
    TRAINSIM_CHECK(width > 0 && w.values.size() % width == 0 && g.values.size() >= count * width &&
                       r.values.size() >= 2 * count && (v == nullptr || v->values.size() == w.values.size()),
                   "a lazy step of a table, its rows and their values, and its velocity of different sizes");
    TRAINSIM_CHECK(v != nullptr || options.momentum == 0, "a momentum step without its velocity");
    KeptArray* const arrays[] = {&w, v, &r, &g};
    in_turn(arrays, [&] {
      cuda::sgd_step_rows(w.values.get(), v == nullptr ? nullptr : v->values.get(),
                          reinterpret_cast<const int64_t*>(r.values.get()), g.values.get(), count, width,
                          static_cast<float>(options.learning_rate),
                          v == nullptr ? 0.0f : static_cast<float>(options.momentum),
                          static_cast<float>(options.weight_decay), core_->stream);
    });
  }

  // Every parameter's step by cuda::sgd_step_all, after the work on each of
  // its arrays, one launch per kSgdTensorsPerLaunch parameters.
  void sgd_step_all(std::span<const SgdArrays> params, const SgdOptions& options) override {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    std::vector<cuda::SgdTensor> tensors;
    std::vector<KeptArray*> touched;
    tensors.reserve(params.size());
    for (const SgdArrays& p : params) {
      KeptArray& w = of_this_gpu(p.weights);
      KeptArray& g = of_this_gpu(p.grad);
      KeptArray* v = p.velocity == nullptr ? nullptr : &of_this_gpu(p.velocity);
      TRAINSIM_CHECK(w.values.size() == g.values.size() && (v == nullptr || v->values.size() == w.values.size()),
                     "a step of weights, gradient and velocity of different sizes");
      if (w.values.size() == 0) continue;  // nothing to step (an empty array holds no memory, its pointers null)
      tensors.push_back({w.values.get(), g.values.get(), v == nullptr ? nullptr : v->values.get(), w.values.size()});
      touched.insert(touched.end(), {&w, &g, v});
    }
    const float momentum = static_cast<float>(options.momentum);
    for (const cuda::SgdTensor& t : tensors) {
      TRAINSIM_CHECK(t.v != nullptr || momentum == 0.0f, "a momentum step without its velocity");
    }
    in_turn(touched, [&] {
      cuda::sgd_step_all(tensors.data(), static_cast<int64_t>(tensors.size()),
                         static_cast<float>(options.learning_rate), momentum, static_cast<float>(options.weight_decay),
                         /*zero_gradients=*/false, core_->stream);
    });
  }

 private:
  // `work` queued on the store's stream after the work on each of `arrays`
  // (null ones skipped), each array's event then following it.
  template <typename Work>
  void in_turn(std::span<KeptArray* const> arrays, Work work) {
    for (const KeptArray* a : arrays) {
      if (a != nullptr) TRAINSIM_CUDA(cudaStreamWaitEvent(core_->stream, a->written, 0));
    }
    work();
    TRAINSIM_CUDA(cudaGetLastError());
    for (KeptArray* a : arrays) {
      if (a != nullptr) TRAINSIM_CUDA(cudaEventRecord(a->written, core_->stream));
    }
  }

  // An array of a peer GPU's store copied in on this store's peer stream
  // after the work on it. An event is recorded only on a stream of its own
  // GPU: the array's then follows the copy on its store's `released`.
  std::shared_ptr<KeptValues> copy_from_peer(PooledArray& from) {
    TRAINSIM_CHECK(peer_gpus(core_->gpu, from.gpu), "an array of GPU " + std::to_string(from.gpu) +
                                                        ", whose memory GPU " + std::to_string(core_->gpu) +
                                                        " does not read");
    std::shared_ptr<PooledArray> a = lend(from.values.size(), /*store_waits=*/false);  // sets this GPU
    TRAINSIM_CUDA(cudaStreamWaitEvent(core_->peer, a->written, 0));
    TRAINSIM_CUDA(cudaStreamWaitEvent(core_->peer, from.written, 0));
    if (from.values.size() > 0) {
      TRAINSIM_CUDA(cudaMemcpyPeerAsync(a->values.get(), core_->gpu, from.values.get(), from.gpu, from.values.bytes(),
                                        core_->peer));
    }
    TRAINSIM_CUDA(cudaEventRecord(a->written, core_->peer));
    TRAINSIM_CUDA(cudaSetDevice(from.gpu));
    TRAINSIM_CUDA(cudaStreamWaitEvent(from.home->released, a->written, 0));
    TRAINSIM_CUDA(cudaEventRecord(from.written, from.home->released));
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    return a;
  }

  KeptArray& of_this_gpu(KeptValues* kept) const {
    auto* k = dynamic_cast<KeptArray*>(kept);
    TRAINSIM_CHECK(k != nullptr && k->gpu == core_->gpu, "values kept by another store");
    return *k;
  }

  // An array of `floats` from the pool (BufferPool::lend), the store's
  // stream after the last work on a buffer reused (unless `store_waits` is
  // false: the caller's stream waits for its event); its values are the
  // caller's to set.
  std::shared_ptr<PooledArray> lend(int64_t floats, bool store_waits = true) {
    TRAINSIM_CUDA(cudaSetDevice(core_->gpu));
    const ChargeTo charge(core_->budget);
    Lent lent;
    try {
      lent = core_->pool.lend(floats);
    } catch (const MemoryBudgetExceeded&) {
      if (!core_->make_room) throw;
      core_->make_room();  // its device's idle networks go, then once more
      lent = core_->pool.lend(floats);
    }
    if (!lent.fresh && store_waits) TRAINSIM_CUDA(cudaStreamWaitEvent(core_->stream, lent.written, 0));
    auto a = std::make_shared<PooledArray>();
    a->gpu = core_->gpu;
    a->values = std::move(lent.values);
    a->written = lent.written;
    a->home = core_;
    return a;
  }

  std::shared_ptr<StoreCore> core_;
};

}  // namespace
}  // namespace cuda

std::shared_ptr<DeviceStore> make_cuda_device_store(int gpu, std::shared_ptr<MemoryBudget> budget) {
  return std::make_shared<cuda::CudaDeviceStore>(gpu, std::move(budget));
}

namespace {

// Peer access from GPU `from` to `to`'s memory, enabled (or found enabled).
bool enable_peer(int from, int to) {
  TRAINSIM_CUDA(cudaSetDevice(from));
  const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
  if (status == cudaSuccess) return true;
  (void)cudaGetLastError();  // an answer, not a launch's error to report
  return status == cudaErrorPeerAccessAlreadyEnabled;
}

}  // namespace

bool peer_gpus(int a, int b) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, bool> known;
  if (a == b) return false;
  std::lock_guard lock(mu);
  const auto pair = std::minmax(a, b);
  const auto it = known.find(pair);
  if (it != known.end()) return it->second;
  // The calling thread is left on either GPU: every caller of the runtime
  // sets its own first.
  int ab = 0, ba = 0;
  TRAINSIM_CUDA(cudaDeviceCanAccessPeer(&ab, a, b));
  TRAINSIM_CUDA(cudaDeviceCanAccessPeer(&ba, b, a));
  const bool both = ab != 0 && ba != 0 && enable_peer(a, b) && enable_peer(b, a);
  known[pair] = both;
  return both;
}

}  // namespace trainsim
