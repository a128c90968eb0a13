// The analytic profiler: a roofline estimate (Williams, Waterman, Patterson,
// CACM 2009) of every layer's forward and backward time on a cluster's
// device, for when no measurement exists (`trainsim profile --analytic`).
// fp32 throughout: 4 bytes per element, the device's fp32 peak.
#pragma once

#include <cstdint>
#include <string>

#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"

namespace trainsim {

// Fixed cost of every kernel (one forward, each backward pass): a CUDA kernel
// launch takes ~3-10 us; a CPU framework's per-op dispatch is of the same order.
inline constexpr double kLaunchOverheadS = 5e-6;

// Fraction of the device's memory bandwidth a streaming kernel sustains
// (STREAM-like copies reach ~75-90% of the datasheet figure on GPUs).
inline constexpr double kMemoryEfficiency = 0.8;

// Fraction of fp32 peak each op kind reaches on large layers:
// conv2d: cuDNN convolutions reach ~50-70% of fp32 peak on large layers.
// Winograd 3×3 kernels can beat peak in direct-convolution FLOPs (PipeDream's
// vgg16 profile implies ~1.1× a V100's fp32 peak), so this is conservative there.
inline constexpr double kConvEfficiency = 0.6;
// linear: large SGEMMs reach ~70-80% of peak (cuBLAS, MKL).
inline constexpr double kLinearEfficiency = 0.7;
// lstm: per-step recurrent GEMMs are narrow and gate math is pointwise; cuDNN
// RNNs reach ~40-60% of peak at batch >= 64.
inline constexpr double kLstmEfficiency = 0.5;
// attention: projection GEMMs near SGEMM rate, scores and softmax far below.
inline constexpr double kAttentionEfficiency = 0.5;
// Everything else (elementwise, pooling, norms, add, concat, embedding): at
// ~1 FLOP per 8 bytes these are memory-bound, so this value rarely decides.
inline constexpr double kMemoryBoundOpEfficiency = 0.25;

// Largest per-device batch an analytic profile is taken at: past it, a
// layer's bytes leave what any device holds (and profile validation's bounds).
inline constexpr int64_t kMaxAnalyticBatch = 1'000'000'000;

// The fraction of fp32 peak that layers of kind `op` reach (constants above).
double compute_efficiency(const std::string& op);

// Roofline time of one kernel: launch + max(compute, memory), with `flops`
// at peak × compute_efficiency(op) and `bytes` at bandwidth × kMemoryEfficiency.
double roofline_s(const DeviceSpec& device, const std::string& op, double flops, double bytes);

// Profile of `model` at `batch` samples on `cluster.device` (source
// "analytic"). Per layer, for the whole batch:
//   forward: roofline of forward_flops·batch and bytes = 4·(inputs + output
//     elements)·batch + param_bytes (embeddings read only the looked-up rows);
//   backward, layers with parameters: an input-gradient and a weight-gradient
//     pass, each costing a forward pass; the input-gradient pass is skipped
//     when no input carries a gradient (e.g. the first layer, fed by "input");
//   backward, parameter-free layers: one pass moving 2× the forward bytes,
//     skipped likewise when no input carries a gradient.
// InputError naming `--batch` if batch < 1 or > kMaxAnalyticBatch.
Profile analytic_profile(const Model& model, int64_t batch, const Cluster& cluster);

}  // namespace trainsim
