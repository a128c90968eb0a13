// CudaNetwork's marks of its stream's work (RangeNetwork::mark): CUDA events
// with timing, read against an origin event of the GPU whose time on the
// host's monotonic clock is known; and its stream's wait for an input
// exported into a store's array (RangeNetwork::wait_for).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/cuda_network.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "model/clock.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {
namespace {

// An event recorded on a stream with nothing queued, and waited for: the
// GPU's clock met the host's between the record and the wait's end, taken
// as halfway (within half that round trip: microseconds).
struct ClockOrigin {
  cudaEvent_t event = nullptr;
  double host_s = 0;
  double round_trip_s = 0;
  ClockOrigin() = default;
  ClockOrigin(const ClockOrigin&) = delete;
  ClockOrigin& operator=(const ClockOrigin&) = delete;
  ~ClockOrigin() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

// Marks read their times from an origin at most this old: an elapsed time
// is a float of milliseconds (its step 8 µs at 100 s), and the GPU's timer
// and the host's clock drift apart by a few µs a second.
constexpr double kOriginLifeS = 1;
constexpr int kOriginSamples = 3;  // the shortest round trip's is kept

std::shared_ptr<ClockOrigin> sample_origin(int device) {
  TRAINSIM_CUDA(cudaSetDevice(device));
  cudaStream_t idle = nullptr;
  TRAINSIM_CUDA(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking));
  std::shared_ptr<ClockOrigin> best;
  cudaError_t status = cudaSuccess;
  for (int k = 0; k < kOriginSamples && status == cudaSuccess; ++k) {
    auto origin = std::make_shared<ClockOrigin>();
    status = cudaEventCreate(&origin->event);
    if (status != cudaSuccess) break;
    const double before_s = monotonic_clock_s();
    status = cudaEventRecord(origin->event, idle);
    if (status == cudaSuccess) status = cudaEventSynchronize(origin->event);
    const double after_s = monotonic_clock_s();
    origin->host_s = (before_s + after_s) / 2;
    origin->round_trip_s = after_s - before_s;
    if (status == cudaSuccess && (best == nullptr || origin->round_trip_s < best->round_trip_s)) best = origin;
  }
  cudaStreamDestroy(idle);
  TRAINSIM_CUDA(status);
  return best;
}

// A new origin whose round trip is this much longer than the one it would
// replace (the GPU's queues busy: an idle stream may share one with busy
// ones) is left unused, unless the old one is kOriginLongestLifeS old.
constexpr double kWorseRoundTrip = 4;
constexpr double kFineRoundTripS = 20e-6;
constexpr double kOriginLongestLifeS = 30;

// GPU `device`'s origin, shared by its networks, sampled again once older
// than kOriginLifeS (at most once a kOriginLifeS). Kept for the process's
// life (the runtime may be gone by the time static objects are destroyed).
std::shared_ptr<ClockOrigin> origin_of(int device) {
  struct Kept {
    std::shared_ptr<ClockOrigin> origin;
    double sampled_s = 0;
  };
  static std::mutex mu;
  static auto* origins = new std::map<int, Kept>;
  std::lock_guard lock(mu);
  Kept& kept = (*origins)[device];
  const double now_s = monotonic_clock_s();
  if (kept.origin == nullptr || (now_s - kept.origin->host_s > kOriginLifeS && now_s - kept.sampled_s > kOriginLifeS)) {
    std::shared_ptr<ClockOrigin> fresh = sample_origin(device);
    kept.sampled_s = now_s;
    if (kept.origin == nullptr || now_s - kept.origin->host_s > kOriginLongestLifeS ||
        fresh->round_trip_s <= std::max(kWorseRoundTrip * kept.origin->round_trip_s, kFineRoundTripS)) {
      kept.origin = std::move(fresh);
    }
  }
  return kept.origin;
}

// Timing events marks let go, per GPU, for the next marks there: a timed
// op takes two, and creating and destroying each cost the host more than
// recording it. An event taken is recorded again, which replaces what it
// recorded before. Never destroyed, as the CUDA runtime they belong to.
struct IdleEvents {
  std::mutex mu;
  std::map<int, std::vector<cudaEvent_t>> of_gpu;
};
IdleEvents& idle_events() {
  static auto* idle = new IdleEvents;
  return *idle;
}

// An idle timing event of GPU `device` (the current one), else a new one.
cudaEvent_t take_event(int device) {
  {
    IdleEvents& idle = idle_events();
    std::lock_guard lock(idle.mu);
    std::vector<cudaEvent_t>& events = idle.of_gpu[device];
    if (!events.empty()) {
      const cudaEvent_t e = events.back();
      events.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  TRAINSIM_CUDA(cudaEventCreate(&e));
  return e;
}

void give_back(int device, cudaEvent_t e) {
  IdleEvents& idle = idle_events();
  std::lock_guard lock(idle.mu);
  idle.of_gpu[device].push_back(e);
}

class EventMark final : public WorkMark {
 public:
  EventMark(int device, std::shared_ptr<ClockOrigin> origin, cudaStream_t stream)
      : device_(device), origin_(std::move(origin)), event_(take_event(device)) {
    const cudaError_t status = cudaEventRecord(event_, stream);
    if (status != cudaSuccess) cudaEventDestroy(event_);  // not pooled: the destructor does not run when this throws
    TRAINSIM_CUDA(status);
  }
  EventMark(const EventMark&) = delete;
  EventMark& operator=(const EventMark&) = delete;
  ~EventMark() override { give_back(device_, event_); }

  bool done() override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // an answer, not a launch's error to report
      return false;
    }
    TRAINSIM_CUDA(status);
    return true;
  }

  double done_s() override { return origin_->host_s + seconds_from(origin_->event); }

  double seconds_since(WorkMark& earlier) override {
    auto* other = dynamic_cast<EventMark*>(&earlier);
    TRAINSIM_CHECK(other != nullptr && other->device_ == device_, "marks of work on different GPUs compared");
    TRAINSIM_CUDA(cudaEventSynchronize(other->event_));
    return seconds_from(other->event_);
  }

 private:
  // From `earlier` (done) to this event, once it is done.
  double seconds_from(cudaEvent_t earlier) {
    TRAINSIM_CUDA(cudaEventSynchronize(event_));
    float ms = 0;
    TRAINSIM_CUDA(cudaEventElapsedTime(&ms, earlier, event_));
    return static_cast<double>(ms) * 1e-3;
  }

  int device_;
  std::shared_ptr<ClockOrigin> origin_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace
}  // namespace trainsim::cuda

namespace trainsim {

std::shared_ptr<WorkMark> CudaNetwork::mark() {
  const cuda::NetworkState& s = *state_;
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));  // a new event is made on the current GPU
  std::shared_ptr<cuda::ClockOrigin> origin = cuda::origin_of(s.context.device);
  return std::make_shared<cuda::EventMark>(s.context.device, std::move(origin), s.context.stream);
}

void CudaNetwork::wait_for(const Tensor& x) {
  if (x.exported == nullptr) return;
  const cuda::NetworkState& s = *state_;
  auto* k = dynamic_cast<cuda::KeptArray*>(x.exported->values.get());
  TRAINSIM_CHECK(k != nullptr && k->gpu == s.context.device, "a boundary exported on another GPU");
  TRAINSIM_CUDA(cudaSetDevice(s.context.device));
  TRAINSIM_CUDA(cudaStreamWaitEvent(s.context.stream, k->written, 0));
}

}  // namespace trainsim
