// A PyTorch profiler (Kineto) trace as compact events: the Chrome-trace JSON
// that `torch.profiler` writes (`export_chrome_trace`, the TensorBoard
// handler), gzip or not, in the current schema (`cat` cpu_op, kernel,
// cuda_runtime, ...) or the 2021 one (Operator, Kernel, Runtime, ...),
// streamed: each event is read, kept as a few fields and dropped, so a trace
// of hundreds of MB never stands whole in memory.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace trainsim {

enum class KinetoCat : uint8_t {
  kCpuOp,          // cpu_op / Operator: an ATen op or, in the 2021 schema, an annotation
  kAnnotation,     // user_annotation (ProfilerStep#N, Optimizer.step#..., nccl:*, record_function)
  kGpuAnnotation,  // gpu_user_annotation
  kPython,         // python_function (with_stack / with_modules: nn.Module: X_0)
  kRuntime,        // cuda_runtime / cuda_driver / Runtime: a launch on the host
  kKernel,         // kernel / Kernel
  kMemcpy,         // gpu_memcpy / Memcpy
  kMemset,         // gpu_memset / Memset
};

// One input of an op as `record_shapes=True` records it: its dims (empty for
// a scalar or a list) and bytes per element (0 where its type is not a
// tensor element type).
struct KinetoInput {
  std::vector<int64_t> dims;
  int element_bytes = 0;
  double bytes() const;  // elements × element_bytes
};

constexpr int64_t kNoId = -1;

struct KinetoEvent {
  KinetoCat cat = KinetoCat::kCpuOp;
  uint32_t name = 0;    // into KinetoTrace::names
  uint32_t thread = 0;  // into KinetoTrace::threads: "pid/tid" (a GPU's: "device/stream")
  double ts_us = 0, dur_us = 0;
  int64_t external_id = kNoId;
  int64_t correlation = kNoId;   // runtime ↔ kernel, memcpy, memset
  int64_t sequence = kNoId;      // autograd's sequence number (forward op ↔ its backward)
  bool backward = false;         // "Fwd thread id" set and non-zero: run by autograd's engine
  int64_t device = kNoId;        // a GPU event's device
  double message_elements = -1;  // an NCCL kernel's "In msg nelems"
  int message_element_bytes = 0;
  uint32_t inputs = std::numeric_limits<uint32_t>::max();  // into KinetoTrace::inputs, where recorded
  double end_us() const { return ts_us + dur_us; }
};

struct KinetoTrace {
  std::string path;
  std::vector<KinetoEvent> events;  // the spans ("ph": "X") of the categories above, in file order
  std::vector<std::string> names, threads;
  std::vector<std::vector<KinetoInput>> inputs;
  std::string device_name;         // deviceProperties[0].name, or ""
  double device_memory_bytes = 0;  // deviceProperties[0].totalGlobalMem, or 0
  int64_t world_size = 1, rank = 0;
  std::string backend;
  bool legacy = false;         // the 2021 schema
  int64_t skipped_events = 0;  // spans of other categories, flows, instants, metadata
};

// Reads the trace at `path` (gzip by its magic bytes). InputError naming the
// path for a file that cannot be read, a truncated or corrupt gzip stream,
// text that is not JSON (with the byte where it stops), JSON that is not a
// Chrome trace (no traceEvents), a span without a numeric ts or dur, and a
// trace with no span at all.
KinetoTrace read_kineto_trace(const std::string& path);

}  // namespace trainsim
