// A Kineto trace (kineto_trace.hpp) turned into a trainsim profile and a
// summary of what it measured (docs/importing-pytorch.md):
// - steps: the ProfilerStep#N spans on the thread that runs them; GPU work
//   belongs to the step whose span holds its launch;
// - layers: the outermost ops of the forward (on that thread, outside the
//   optimizer's and the data loader's spans, grouped by their nn.Module
//   spans where the trace has them), each with the GPU time of the
//   kernels, copies and sets its ops launched; a backward op of autograd's
//   engine joins the forward op of its sequence number (one that matches
//   none, such as AccumulateGrad, the backward run before it); grouped at
//   the chosen granularity; the optimizer's GPU time spread over the layers
//   by their parameters;
// - sizes from the recorded input shapes (record_shapes=True), else the
//   NCCL all-reduces' element counts (DDP's buckets) for the parameters;
// - per step, the GPU's busy time (compute and NCCL kernels apart, their
//   overlap), its idle time, the data loader's time; a step whose GPU
//   idles more than a tenth of it is host-bound.
// Each layer's time is its median over the steps whose forward runs the
// same ops as most steps do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/kineto/kineto_trace.hpp"
#include "profiles/profile.hpp"

namespace trainsim {

struct KinetoImportOptions {
  // "module" (a layer a leaf nn.Module span: with_modules=True; ops that a
  // container module runs itself join the layer before), "layer" (a layer
  // starts at each op with weights: convolutions, linear, norms,
  // embeddings, recurrent), "op" (each outermost forward op a layer),
  // "auto" (module where the trace has module spans, else layer), or a
  // number N (those layers merged into N of about equal time).
  std::string granularity = "auto";
  int64_t batch = 0;  // 0: from the first op's recorded input shape (else unknown: batch_known)
  std::string model;  // "": the file's name
};

// One step as the trace measured it (seconds).
struct KinetoStep {
  std::string name;
  double step_s = 0;         // the ProfilerStep span
  double gpu_busy_s = 0;     // the union of its GPU events
  double compute_s = 0;      // the union of its kernels, copies and sets but NCCL's
  double comm_s = 0;         // the union of its NCCL kernels
  double overlap_s = 0;      // of comm_s, the time compute ran too
  double data_loader_s = 0;  // its enumerate(DataLoader) spans
  double forward_s = 0, backward_s = 0, optimizer_s = 0, other_s = 0;  // GPU time by phase
  std::vector<double> all_reduce_bytes;                                // its NCCL all-reduces, in launch order
  bool analysed = false;                                               // its forward runs the ops most steps run
};

struct KinetoImport {
  Profile profile;
  std::vector<KinetoStep> steps;
  KinetoStep median;                  // each field the median over the analysed steps
  bool host_bound = false;            // the GPU idles over a tenth of the median step
  bool batch_known = false;           // given, or recorded; else the profile says 1
  double gradient_bytes = 0;          // one step's all-reduced bytes (DDP's buckets), 0 without NCCL
  double all_reduce_bytes_per_s = 0;  // bytes over the NCCL all-reduce kernels' time, 0 without
  std::vector<std::string> notes;     // fallbacks taken and what the trace lacks
};

// InputError naming the trace for a trace without ProfilerStep spans or
// forward ops in them, and naming --granularity for one that is not op,
// layer or a positive number.
KinetoImport import_kineto(const KinetoTrace& trace, const KinetoImportOptions& options);

// Whether a forward op of this name carries weights (aten::conv2d,
// aten::linear, aten::addmm, the norms, embeddings, recurrent layers).
bool op_has_weights(const std::string& op);

// The trace's machine for `predict`: its world size of its GPU (memory from
// the trace, peak from the profile's times), one machine, the link's rate
// as the all-reduces measured it (a bus bandwidth), else NVLink-class
// defaults stated in the description.
Cluster kineto_cluster(const KinetoTrace& trace, const KinetoImport& imported);

}  // namespace trainsim
