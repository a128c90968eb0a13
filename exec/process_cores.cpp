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

// Read before main, on the main thread, so before any thread is pinned.
const StartCores kStartCores = [] {
  StartCores cores;
  CPU_ZERO(&cores.mask);
  if (sched_getaffinity(0, sizeof cores.mask, &cores.mask) == 0 && CPU_COUNT(&cores.mask) > 0) {
    cores.count = CPU_COUNT(&cores.mask);
    cores.known = true;
  }
  return cores;
}();

}  // namespace

int64_t process_start_cores() { return kStartCores.count; }

bool run_on_process_cores() {
  return kStartCores.known && pthread_setaffinity_np(pthread_self(), sizeof kStartCores.mask, &kStartCores.mask) == 0;
}

OnProcessCores::OnProcessCores() {
  CPU_ZERO(&saved_);
  restore_ = pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) == 0 && run_on_process_cores();
}

OnProcessCores::~OnProcessCores() {
  if (restore_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
}

}  // namespace trainsim
