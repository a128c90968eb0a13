// reuse_freed_memory: glibc's mallopt thresholds (see the header).
#include "exec/tensor/memory_reuse.hpp"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainsim {

bool reuse_freed_memory() {
#if defined(__GLIBC__)
  // 32 MB is the largest threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2);
  // setting either value also stops glibc from moving them by itself.
  constexpr int kMmapThresholdBytes = 32 << 20;
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  // One arena for every thread: with glibc's per-thread arenas one of two
  // fmnist-resnet20 workers' backward ran 20-50% slower than the other's at
  // batch 64, from run to run (docs/results.md; how is not established).
  // The price: threads allocating at once wait on its lock.
  const bool arena_set = mallopt(M_ARENA_MAX, 1) == 1;
  return mmap_set && trim_set && arena_set;
#else
  return false;
#endif
}

}  // namespace trainsim
