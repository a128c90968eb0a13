// Copies between the host and a CudaNetwork's buffers: pageable ones, the
// pinned memory they go through (grown_pinned, PinnedBuffer), a loss read
// when the host first asks (pending_loss), and the network's buffers
// brought back for tests and checks (CudaNetwork::output and the rest).
#include <memory>
#include <mutex>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/cuda/cuda_network_state.hpp"
#include "model/error.hpp"

namespace trainsim::cuda {

void upload(float* to, const Tensor& from, cudaStream_t stream) {
  TRAINSIM_CUDA(
      cudaMemcpyAsync(to, from.data.data(), sizeof(float) * from.data.size(), cudaMemcpyHostToDevice, stream));
}

float* grown_pinned(float*& buffer, size_t& capacity, size_t floats) {
  if (floats > capacity) {
    if (buffer != nullptr) TRAINSIM_CUDA(cudaFreeHost(buffer));
    buffer = nullptr;
    capacity = 0;
    TRAINSIM_CUDA(cudaMallocHost(reinterpret_cast<void**>(&buffer), floats * sizeof(float)));
    capacity = floats;
  }
  return buffer;
}

float* pinned_home(NetworkState& s, size_t floats) { return grown_pinned(s.home, s.home_floats, floats); }

float* refill(PinnedBuffer& buffer, size_t floats) {
  if (buffer.copied == nullptr) {
    TRAINSIM_CUDA(cudaEventCreateWithFlags(&buffer.copied, cudaEventDisableTiming));
  } else {
    TRAINSIM_CUDA(cudaEventSynchronize(buffer.copied));
  }
  return grown_pinned(buffer.host, buffer.capacity, floats);
}

void record_copies(PinnedBuffer& buffer, cudaStream_t stream) { TRAINSIM_CUDA(cudaEventRecord(buffer.copied, stream)); }

namespace {

double mean_of(const float* losses, int64_t positions) {
  double total = 0;
  for (int64_t i = 0; i < positions; ++i) total += losses[i];
  return positions > 0 ? total / static_cast<double>(positions) : 0.0;
}

// An idle slot of `slots`, or a new one; back to them when let go.
std::shared_ptr<PinnedBuffer> take_slot(const std::shared_ptr<LossSlots>& slots) {
  std::unique_ptr<PinnedBuffer> slot;
  {
    std::lock_guard lock(slots->mu);
    if (!slots->idle.empty()) {
      slot = std::move(slots->idle.back());
      slots->idle.pop_back();
    }
  }
  if (slot == nullptr) slot = std::make_unique<PinnedBuffer>();
  const std::weak_ptr<LossSlots> home = slots;
  return {slot.release(), [home](PinnedBuffer* p) {
            std::unique_ptr<PinnedBuffer> owned(p);
            if (const std::shared_ptr<LossSlots> pool = home.lock()) {
              std::lock_guard lock(pool->mu);
              pool->idle.push_back(std::move(owned));
            }
          }};
}

}  // namespace

double mean_loss(const NetworkState& s) {
  std::vector<float> losses(static_cast<size_t>(s.positions));
  TRAINSIM_CUDA(cudaMemcpyAsync(losses.data(), s.loss.get(), s.loss.bytes(), cudaMemcpyDeviceToHost, s.context.stream));
  TRAINSIM_CUDA(cudaStreamSynchronize(s.context.stream));
  return mean_of(losses.data(), s.positions);
}

PendingLoss pending_loss(NetworkState& s) {
  std::shared_ptr<PinnedBuffer> slot = take_slot(s.loss_slots);
  float* into = refill(*slot, static_cast<size_t>(s.positions));
  TRAINSIM_CUDA(cudaMemcpyAsync(into, s.loss.get(), s.loss.bytes(), cudaMemcpyDeviceToHost, s.context.stream));
  record_copies(*slot, s.context.stream);
  return PendingLoss([slot = std::move(slot), positions = s.positions] {
    TRAINSIM_CUDA(cudaEventSynchronize(slot->copied));
    return mean_of(slot->host, positions);
  });
}

Tensor download(const float* from, std::vector<int64_t> shape, cudaStream_t stream) {
  Tensor t(std::move(shape));
  TRAINSIM_CUDA(cudaMemcpyAsync(t.data.data(), from, sizeof(float) * t.data.size(), cudaMemcpyDeviceToHost, stream));
  TRAINSIM_CUDA(cudaStreamSynchronize(stream));
  return t;
}

std::vector<int64_t> batched(int64_t batch, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out{batch};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

}  // namespace trainsim::cuda

namespace trainsim {

Tensor CudaNetwork::output(int64_t layer) const {
  const cuda::NetworkState& s = *state_;
  TRAINSIM_CHECK(layer >= 0 && layer < static_cast<int64_t>(s.layers.size()), "a layer of the network");
  const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  TRAINSIM_CHECK(l.y != nullptr, l.name + ": an output the GPU network does not hold");
  return cuda::download(l.y, cuda::batched(s.batch, l.out_shape), s.context.stream);
}

bool CudaNetwork::has_input_gradient(int64_t layer) const {
  const cuda::NetworkState& s = *state_;
  return layer >= 0 && layer < static_cast<int64_t>(s.layers.size()) &&
         s.layers[static_cast<size_t>(layer)]->dx() != nullptr;
}

Tensor CudaNetwork::input_gradient(int64_t layer) const {
  const cuda::NetworkState& s = *state_;
  TRAINSIM_CHECK(has_input_gradient(layer), "a layer whose input gradient is computed");
  const cuda::GpuLayer& l = *s.layers[static_cast<size_t>(layer)];
  return cuda::download(l.dx(), cuda::batched(s.batch, l.in_shape), s.context.stream);
}

Gradients CudaNetwork::gradients() const {
  const cuda::NetworkState& s = *state_;
  Gradients out(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const cuda::GpuLayer& l = *s.layers[i];
    for (size_t p = 0; p < l.grads.size(); ++p) {
      ParamGrad g;
      g.dense = cuda::download(l.grads[p].get(), l.param_shapes[p], s.context.stream);
      out[i].push_back(std::move(g));
    }
  }
  return out;
}

Weights CudaNetwork::weights() const {
  const cuda::NetworkState& s = *state_;
  Weights out(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const cuda::GpuLayer& l = *s.layers[i];
    for (size_t p = 0; p < l.params.size(); ++p) {
      out[i].push_back(cuda::download(l.params[p].get(), l.param_shapes[p], s.context.stream));
    }
  }
  return out;
}

}  // namespace trainsim
