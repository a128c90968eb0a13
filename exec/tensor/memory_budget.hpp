// Device memory a worker's device may hold: a virtual GPU worker's share of
// its GPU (`cuda:GxW`: a W-th of the GPU's memory), so a run of W virtual
// workers goes through where W GPUs of that size would hold it and stops,
// saying so, where they would not. What the worker's networks and store
// allocate charges it (a GPU's: exec/cuda's DeviceArray, while a ChargeTo
// of the budget lives on the allocating thread), a free releases it, and
// the most it held is the worker's peak (Device::memory_use).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "model/error.hpp"

namespace trainsim {

// A charge past a budget's limit: an InputError naming --devices, which a
// GPU's pool of buffers also takes as "no room" (freeing idle ones first).
class MemoryBudgetExceeded : public InputError {
 public:
  using InputError::InputError;
};

class MemoryBudget {
 public:
  // `owner` names the worker in the error ("worker 2 of cuda:0x4"), `advice`
  // says what would fit; `limit_bytes` < 0: none, the memory only counted.
  MemoryBudget(std::string owner, int64_t limit_bytes, std::string advice = "");

  // `bytes` more held; MemoryBudgetExceeded, nothing charged, where that
  // would pass the limit.
  void charge(int64_t bytes);
  // `bytes` fewer held (what was charged: a release called from a
  // destructor never throws, and never takes the count below zero).
  void release(int64_t bytes) noexcept;

  // Throws MemoryBudgetExceeded for `bytes` more that the device itself had
  // no room for while the budget did (its context, its libraries and
  // other processes hold the rest): as a charge past the limit, what is
  // kept for reuse goes before the run stops with it.
  [[noreturn]] void refuse_unavailable(int64_t bytes, const std::string& device) const;

  int64_t held() const;
  int64_t peak() const;
  int64_t limit() const { return limit_; }

 private:
  const std::string owner_, advice_;
  const int64_t limit_;
  mutable std::mutex mu_;
  int64_t held_ = 0, peak_ = 0;
};

// While one lives on a thread, what that thread allocates charges its budget
// (none for a null one); the innermost of nested scopes counts.
class ChargeTo {
 public:
  explicit ChargeTo(std::shared_ptr<MemoryBudget> budget);
  ~ChargeTo();
  ChargeTo(const ChargeTo&) = delete;
  ChargeTo& operator=(const ChargeTo&) = delete;

  // The innermost scope's budget on this thread; null where there is none.
  static std::shared_ptr<MemoryBudget> current();

 private:
  std::shared_ptr<MemoryBudget> budget_;
  const ChargeTo* outer_;
};

}  // namespace trainsim
