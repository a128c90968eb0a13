// The process's allocator policy: memory a training step frees is kept for
// the next step's allocations instead of being handed back to the system.
#pragma once

namespace trainsim {

// With glibc's defaults a freed block of activations above the mmap
// threshold goes back to the system (munmap, or a trim of the heap's top),
// and the next step faults every page of it in again: fortunes-gpt's step
// ran 10% slower, and the profiler, which allocates each pass afresh, timed
// the layers late in a pass up to 1.9x slow. Blocks up to 32 MB (glibc's
// largest threshold) now come from the heap and stay there; as a framework's
// caching allocator, the process keeps its peak. Every thread allocates from
// that one heap (glibc's per-thread arenas give memory back on their own). Call once, at start, before
// threads start; a no-op where the C library is not glibc. Returns whether
// the policy took effect.
bool reuse_freed_memory();

}  // namespace trainsim
