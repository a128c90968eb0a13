// The cores this process could run on when it started, before the executor
// pinned any of its threads to one (worker_thread_core, exec/interpreter.hpp):
// where threads made later by a pinned thread, the project's or a
// library's, should run, rather than on their maker's one core.
#pragma once

#include <sched.h>

#include <cstdint>

namespace trainsim {

// How many (at least 1; 1 where the process's affinity could not be read).
int64_t process_start_cores();

// Lets the calling thread run on every core the process started with;
// false where that is unknown or the machine refuses.
bool run_on_process_cores();

// For its lifetime the calling thread runs on the process's start cores,
// then as it did before: threads a library makes meanwhile keep to the
// process's cores, not to the caller's pin (NCCL's, which take their
// maker's affinity unless NCCL_IGNORE_CPU_AFFINITY is set).
class OnProcessCores {
 public:
  OnProcessCores();
  ~OnProcessCores();
  OnProcessCores(const OnProcessCores&) = delete;
  OnProcessCores& operator=(const OnProcessCores&) = delete;

 private:
  cpu_set_t saved_{};
  bool restore_ = false;
};

}  // namespace trainsim
