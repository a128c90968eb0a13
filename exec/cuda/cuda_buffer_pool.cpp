// BufferPool (cuda_buffer_pool.hpp).
#include "exec/cuda/cuda_buffer_pool.hpp"

#include "exec/cuda/cuda_check.hpp"

namespace trainsim::cuda {
namespace {

bool done(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) (void)cudaGetLastError();  // an answer, not a launch's error to report
  return status == cudaSuccess;
}

// A new buffer, or none where the GPU is out of memory (the error cleared)
// or the budget charged is spent (a virtual worker's share of the GPU).
std::optional<DeviceArray<float>> allocated(int64_t floats) {
  try {
    return DeviceArray<float>(floats);
  } catch (const MemoryBudgetExceeded&) {
    return std::nullopt;
  } catch (const CudaError&) {
    if (cudaGetLastError() != cudaErrorMemoryAllocation) throw;  // (which also clears an out-of-memory)
  }
  return std::nullopt;
}

}  // namespace

Lent BufferPool::lend(int64_t floats) {
  std::optional<Buffer> held = idle_buffer(floats, /*done_only=*/true);
  std::optional<DeviceArray<float>> made;
  if (!held) made = new_buffer(floats);
  if (!held && !made) held = idle_buffer(floats, /*done_only=*/false);
  if (!held && !made) made = last_try(floats);
  if (held) return {std::move(held->first), held->second, false};
  cudaEvent_t written = nullptr;
  TRAINSIM_CUDA(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));  // where this throws, the buffer is freed
  return {std::move(*made), written, true};
}

void BufferPool::give_back(DeviceArray<float> values, cudaEvent_t written) {
  const std::lock_guard lock(mu_);
  const int64_t floats = values.size();
  idle_[floats].emplace_back(std::move(values), written);
}

void BufferPool::clear() {
  const std::lock_guard lock(mu_);
  for (auto& [_, buffers] : idle_) {
    for (auto& [values, event] : buffers) {
      (void)cudaEventSynchronize(event);  // another worker's stream may still read it (an export given back)
      cudaEventDestroy(event);
    }
  }
  idle_.clear();
}

std::optional<BufferPool::Buffer> BufferPool::idle_buffer(int64_t floats, bool done_only) {
  const std::lock_guard lock(mu_);
  auto found = idle_.find(floats);
  if (found == idle_.end()) return std::nullopt;
  std::vector<Buffer>& idle = found->second;
  for (auto it = idle.rbegin(); it != idle.rend(); ++it) {
    if (!done_only || done(it->second)) {
      const auto chosen = std::prev(it.base());
      Buffer taken = std::move(*chosen);
      idle.erase(chosen);
      return taken;
    }
  }
  return std::nullopt;
}

std::optional<DeviceArray<float>> BufferPool::new_buffer(int64_t floats) {
  if (std::optional<DeviceArray<float>> made = allocated(floats)) return made;
  // Buffers are kept by exact size: a run whose sizes change would
  // otherwise hold memory it no longer uses.
  const std::lock_guard lock(release_mu_);  // a second thread short of memory waits for what the first frees
  release_idle(/*done_only=*/true);
  return allocated(floats);
}

DeviceArray<float> BufferPool::last_try(int64_t floats) {
  const std::lock_guard lock(release_mu_);
  release_idle(/*done_only=*/false);
  try {
    return DeviceArray<float>(floats);
  } catch (const CudaError&) {
    (void)cudaGetLastError();  // reported by the throw, not left for the next launch's check
    throw;
  }
}

void BufferPool::free_idle() {
  const std::lock_guard lock(release_mu_);
  release_idle(/*done_only=*/false);
}

void BufferPool::release_idle(bool done_only) {
  std::vector<Buffer> freed;
  {
    const std::lock_guard lock(mu_);
    for (auto& [_, buffers] : idle_) {
      for (auto it = buffers.begin(); it != buffers.end();) {
        if (done_only && !done(it->second)) {
          ++it;
          continue;
        }
        freed.push_back(std::move(*it));
        it = buffers.erase(it);
      }
    }
  }
  for (auto& [values, written] : freed) {
    (void)cudaEventSynchronize(written);
    (void)cudaEventDestroy(written);
    values = DeviceArray<float>();
  }
}

}  // namespace trainsim::cuda
