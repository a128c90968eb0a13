// The steps of a Kineto trace, each with its forward ops, their backward
// and the GPU time each launched (kineto_steps.cpp); kineto_import.cpp
// groups them into layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/kineto/kineto_trace.hpp"

namespace trainsim::kineto_detail {

// An outermost forward op of a step: what its ops launched on the GPU.
struct ForwardUnit {
  uint32_t name = 0;
  size_t event = 0;                                // the op's KinetoEvent
  double forward_us = 0;                           // GPU time its ops launched
  double backward_us = 0;                          // GPU time its backward's ops launched
  double backward_end_us = 0;                      // when its (last) backward op ended on the host
  double cpu_forward_us = 0, cpu_backward_us = 0;  // its ops' and its backward's host time
  int64_t module = -1;  // the innermost leaf nn.Module span around it (with_modules=True), else -1
};

struct StepUnits {
  size_t span = 0;  // the ProfilerStep event
  std::vector<ForwardUnit> forward;
  double optimizer_us = 0, other_us = 0, data_loader_us = 0;
  double cpu_optimizer_us = 0;  // the optimizer's spans on the host
  double gpu_busy_us = 0, compute_us = 0, comm_us = 0, overlap_us = 0;
  // Its NCCL all-reduces: bytes and when each was launched (host clock).
  std::vector<double> all_reduce_bytes, all_reduce_launch_us;
  double all_reduce_kernel_us = 0;
  int64_t unmatched_backward = 0;  // backward ops whose sequence number no forward op of the step has
  int64_t early_kernels = 0;       // GPU events that start before their launch (clock skew)
  std::string key;                 // its forward ops' names, to find the steps that run the same ops
};

struct TraceSteps {
  std::vector<StepUnits> steps;
  int64_t unlaunched_gpu_events = 0;  // GPU events whose launch the trace lacks (assigned by their own time)
  int64_t outside_gpu_events = 0;     // GPU events launched outside every step
};

// InputError naming the trace where it has no ProfilerStep#N span.
TraceSteps trace_steps(const KinetoTrace& trace);

// Whether an op of this name carries weights (convolutions, linear and
// matrix-product layers, norms, embeddings, recurrent layers).
bool has_weights(const std::string& op);
// The bytes of the weights an op of this name reads, from its recorded
// inputs (0 where they are not recorded).
double weight_bytes(const std::string& op, const std::vector<KinetoInput>& inputs);

}  // namespace trainsim::kineto_detail
