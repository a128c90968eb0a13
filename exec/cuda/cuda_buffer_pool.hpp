// The GPU store's buffers let go (cuda_device_store.cpp), kept by exact
// size with the event after their last work, and lent again: first one
// whose work is done, else a new one, so that a buffer still in use (by a
// backward, or by NCCL's send of a boundary, which ends only when another
// process receives it) holds up no stream that has no part in that work.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "exec/cuda/cuda_layer.hpp"

namespace trainsim::cuda {

// A buffer lent: `fresh` where new (its event recorded on nothing yet),
// else reused, its holder's work to wait for `written` first.
struct Lent {
  DeviceArray<float> values;
  cudaEvent_t written = nullptr;
  bool fresh = false;
};

class BufferPool {
 public:
  BufferPool() = default;
  ~BufferPool() { clear(); }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of `floats` on the current GPU: an idle one whose last work is
  // done, else a new one. Where the GPU (or the budget of the thread's
  // ChargeTo) has no room for a new one, the idle buffers whose work is
  // done are freed first; where it still has none, an idle one of this size
  // still in use is lent; failing that, every idle buffer is freed after
  // its last work and the allocation tried once more (CudaError, or
  // MemoryBudgetExceeded, where there is still no room).
  Lent lend(int64_t floats);
  // A buffer let go, with the event after its last work.
  void give_back(DeviceArray<float> values, cudaEvent_t written);
  // Every idle buffer freed after its last work (the owner has waited for
  // its own streams; another's may still read one) and its event destroyed.
  void clear();
  // Every idle buffer freed after its last work.
  void free_idle();

 private:
  using Buffer = std::pair<DeviceArray<float>, cudaEvent_t>;
  // An idle buffer of `floats` taken: one whose last work is done, or (not
  // `done_only`) the last one let go.
  std::optional<Buffer> idle_buffer(int64_t floats, bool done_only);
  // A new buffer, or none where the GPU has no room for it even once the
  // idle buffers whose work is done are freed. Any other error is the caller's.
  std::optional<DeviceArray<float>> new_buffer(int64_t floats);
  DeviceArray<float> last_try(int64_t floats);
  // Frees the idle buffers whose last work is done (`done_only`), or every
  // one after its last work.
  void release_idle(bool done_only);

  std::mutex mu_;          // idle_
  std::mutex release_mu_;  // freeing idle buffers where the GPU is out of memory, one thread at a time
  std::map<int64_t, std::vector<Buffer>> idle_;
};

}  // namespace trainsim::cuda
