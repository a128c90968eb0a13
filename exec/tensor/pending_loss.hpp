// A forward's mean loss as its device gives it: known at once (the CPU's),
// or still being computed (a GPU's, until the host first reads it), so the
// host can go on queuing work instead of waiting for each loss.
#pragma once

#include <functional>
#include <utility>

namespace trainsim {

class PendingLoss {
 public:
  explicit PendingLoss(double value) : value_(value) {}
  // `read` waits for the device and returns the value; called once, on
  // whichever thread reads first.
  explicit PendingLoss(std::function<double()> read) : read_(std::move(read)) {}

  // Whether reading returns at once.
  bool known() const { return !read_; }
  double read() {
    if (read_) {
      value_ = read_();
      read_ = nullptr;
    }
    return value_;
  }

 private:
  double value_ = 0.0;
  std::function<double()> read_;
};

}  // namespace trainsim
