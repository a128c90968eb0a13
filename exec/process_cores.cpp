// The process's start cores (process_cores.hpp).
#include "exec/process_cores.hpp"

#include <pthread.h>

namespace trainsim {
namespace {

struct StartCores {
  cpu_set_t mask{};
  int count = 1;
  bool known = false;
};

// Read on first use, which the static below makes happen before main, on
// the main thread, so before any thread is pinned (and right for a caller
// in another file's static initializer).
const StartCores& start_cores() {
  static const StartCores cores = [] {
    StartCores read;
    CPU_ZERO(&read.mask);
    if (sched_getaffinity(0, sizeof read.mask, &read.mask) == 0 && CPU_COUNT(&read.mask) > 0) {
      read.count = CPU_COUNT(&read.mask);
      read.known = true;
    }
    return read;
  }();
  return cores;
}
[[maybe_unused]] const bool kReadAtStart = (start_cores(), true);

}  // namespace

int64_t process_start_cores() { return start_cores().count; }

bool run_on_process_cores() {
  const StartCores& cores = start_cores();
  return cores.known && pthread_setaffinity_np(pthread_self(), sizeof cores.mask, &cores.mask) == 0;
}

OnProcessCores::OnProcessCores() {
  CPU_ZERO(&saved_);
  restore_ = pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) == 0 && run_on_process_cores();
}

OnProcessCores::~OnProcessCores() {
  if (restore_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
}

}  // namespace trainsim
