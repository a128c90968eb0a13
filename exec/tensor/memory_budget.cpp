#include "exec/tensor/memory_budget.hpp"

#include <algorithm>
#include <utility>

#include "model/error.hpp"
#include "model/units.hpp"

namespace trainsim {
namespace {

thread_local const ChargeTo* innermost = nullptr;

}  // namespace

MemoryBudget::MemoryBudget(std::string owner, int64_t limit_bytes, std::string advice)
    : owner_(std::move(owner)), advice_(std::move(advice)), limit_(limit_bytes) {}

void MemoryBudget::charge(int64_t bytes) {
  TRAINSIM_CHECK(bytes >= 0, "a negative charge of memory");
  std::lock_guard lock(mu_);
  if (limit_ >= 0 && held_ + bytes > limit_) {
    throw MemoryBudgetExceeded("--devices",
                               owner_ + " would hold " + format_bytes(static_cast<double>(held_ + bytes)) + " (" +
                                   format_bytes(static_cast<double>(held_)) + " held, " +
                                   format_bytes(static_cast<double>(bytes)) + " more asked)",
                               "at most its " + format_bytes(static_cast<double>(limit_)) +
                                   (advice_.empty() ? std::string() : ": " + advice_));
  }
  held_ += bytes;
  peak_ = std::max(peak_, held_);
}

void MemoryBudget::refuse_unavailable(int64_t bytes, const std::string& device) const {
  std::lock_guard lock(mu_);
  const std::string share =
      limit_ >= 0 ? " of its " + format_bytes(static_cast<double>(limit_)) + " share" : std::string();
  throw MemoryBudgetExceeded("--devices",
                             owner_ + " holds " + format_bytes(static_cast<double>(held_)) + share + ", and " + device +
                                 " has no room for " + format_bytes(static_cast<double>(bytes)) + " more",
                             "fewer workers on the GPU, or a GPU no other process uses (its context, its libraries "
                             "and other processes hold the rest of its memory)");
}

void MemoryBudget::release(int64_t bytes) noexcept {
  std::lock_guard lock(mu_);
  held_ -= std::clamp<int64_t>(bytes, 0, held_);  // from destructors: never more than was charged
}

int64_t MemoryBudget::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

int64_t MemoryBudget::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}

ChargeTo::ChargeTo(std::shared_ptr<MemoryBudget> budget) : budget_(std::move(budget)), outer_(innermost) {
  innermost = this;
}

ChargeTo::~ChargeTo() { innermost = outer_; }

std::shared_ptr<MemoryBudget> ChargeTo::current() { return innermost == nullptr ? nullptr : innermost->budget_; }

}  // namespace trainsim
